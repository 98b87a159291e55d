// The layers of src/ (lowest first; imports point down only):
//   base/ -> backend/ -> api/ -> render/ | wire/ (siblings) -> engines/ -> http/ -> ai-sdk/ | server/ (siblings) -> cli.ts and
//   the entries index.ts, engines.ts, ai-sdk.ts, server.ts
// base/ is the package's shared vocabulary (public types, the error hierarchy, the option kit) that every layer uses.
// `npm run lint` runs `depcruise src`; each rule's comment is what a violation prints, so it names the rule it enforces.
/** @type {import('dependency-cruiser').IConfiguration} */
module.exports = {
  forbidden: [
    {
      name: 'no-circular',
      severity: 'error',
      comment: 'No cycles in src/, type-only imports included: a cycle makes two modules one, and the layers meaningless.',
      from: { path: '^src/' },
      to: { circular: true },
    },
    {
      name: 'base-imports-nothing',
      severity: 'error',
      comment: 'Layer rule: base/ (types, errors, the option kit) is below every other layer and imports only from base/.',
      from: { path: '^src/base/' },
      to: { path: '^src/', pathNot: '^src/base/' },
    },
    {
      name: 'backend-is-below-api',
      severity: 'error',
      comment: 'Layer rule: backend/ imports only from base/ and itself: nothing from api/, render/, wire/, engines/, http/ or cli.ts.',
      from: { path: '^src/backend/' },
      to: { path: ['^src/(api|render|wire|engines|http)/', '^src/cli\\.ts$'] },
    },
    {
      name: 'api-is-below-render-wire-serving',
      severity: 'error',
      comment: 'Layer rule: api/ imports nothing from render/, wire/, engines/ or http/.',
      from: { path: '^src/api/' },
      to: { path: '^src/(render|wire|engines|http)/' },
    },
    {
      name: 'render-does-not-import-wire',
      severity: 'error',
      comment: 'Layer rule: render/ and wire/ are siblings that never import each other.',
      from: { path: '^src/render/' },
      to: { path: '^src/wire/' },
    },
    {
      name: 'wire-does-not-import-render',
      severity: 'error',
      comment: 'Layer rule: render/ and wire/ are siblings that never import each other.',
      from: { path: '^src/wire/' },
      to: { path: '^src/render/' },
    },
    {
      name: 'render-and-wire-are-below-engines',
      severity: 'error',
      comment: 'Layer rule: render/ and wire/ import nothing from engines/ or http/.',
      from: { path: '^src/(render|wire)/' },
      to: { path: '^src/(engines|http)/' },
    },
    {
      name: 'entries-are-the-top',
      severity: 'error',
      comment:
        'Layer rule: nothing inside src/ imports the entries index.ts, engines.ts, ai-sdk.ts, server.ts or cli.ts; they only list and use the layers below.',
      from: { path: '^src/' },
      to: { path: '^src/(index|engines|http|ai-sdk|server|cli)\\.ts$' },
    },
    {
      name: 'engines-are-below-http',
      severity: 'error',
      comment: 'Layer rule: engines/ (the inference clients) imports nothing of http/ (the HTTP helpers of a gateway).',
      from: { path: '^src/engines/' },
      to: { path: '^src/http/' },
    },
    {
      name: 'server-is-a-top-layer',
      severity: 'error',
      comment:
        'Layer rule: server/ (the gateway: createGateway, serve) sits on http/ and below; nothing below it imports it, nor does ai-sdk/, its sibling.',
      from: { path: '^src/(base|backend|api|render|wire|engines|http|ai-sdk)/' },
      to: { path: '^src/server/' },
    },
    {
      name: 'server-does-not-import-ai-sdk',
      severity: 'error',
      comment: 'Layer rule: server/ and ai-sdk/ are siblings that never import each other.',
      from: { path: '^src/server/' },
      to: { path: '^src/ai-sdk/' },
    },
    // Inside server/ the folders are floors (docs/ARCHITECTURE.md, server/): command/ → gateway/ → the features built
    // on another's face (messages/, background/, socket/, compaction/, conversations/) → the faces (chat/, responses/) → pipeline/ →
    // the parts every floor shares (keys/, tools/, observe/, stores/, gateway-packages.ts). An import never runs up.
    {
      name: 'server-gateway-is-below-command',
      severity: 'error',
      comment: 'Server floor rule: gateway/ (createGateway, the routes, the options) imports nothing of command/ (serve, its settings).',
      from: { path: '^src/server/gateway/' },
      to: { path: '^src/server/command/' },
    },
    {
      name: 'server-features-are-below-the-gateway',
      severity: 'error',
      comment:
        'Server floor rule: the API folders (messages/, background/, socket/, compaction/, conversations/, chat/, responses/) import nothing of gateway/ or command/: the gateway gathers them, not the other way.',
      from: { path: '^src/server/(messages|background|socket|compaction|conversations|chat|responses)/' },
      to: { path: '^src/server/(gateway|command)/' },
    },
    {
      name: 'server-features-on-a-face-are-siblings',
      severity: 'error',
      comment:
        'Server floor rule: messages/, background/, socket/, compaction/ and conversations/ build on the faces below them (chat/, responses/), never on each other.',
      from: { path: '^src/server/(messages|background|socket|compaction|conversations)/' },
      to: { path: '^src/server/(messages|background|socket|compaction|conversations)/', pathNot: '^src/server/$1/' },
    },
    {
      name: 'server-faces-are-below-the-features-on-them',
      severity: 'error',
      comment:
        'Server floor rule: the faces (chat/, responses/) import nothing of the features built on them (messages/, background/, socket/, compaction/, conversations/); what those plug in, they plug in at gateway/compose.ts (ports such as Detach).',
      from: { path: '^src/server/(chat|responses)/' },
      to: { path: '^src/server/(messages|background|socket|compaction|conversations)/' },
    },
    {
      name: 'server-faces-are-siblings',
      severity: 'error',
      comment: 'Server floor rule: chat/ and responses/ never import each other.',
      from: { path: '^src/server/(chat|responses)/' },
      to: { path: '^src/server/(chat|responses)/', pathNot: '^src/server/$1/' },
    },
    {
      name: 'server-pipeline-names-no-api',
      severity: 'error',
      comment:
        'Server floor rule: pipeline/ (prepare → generate → respond → keep, Face and Feature) imports no API folder, nor anything above them: every API runs on it.',
      from: { path: '^src/server/pipeline/' },
      to: { path: '^src/server/(chat|responses|messages|background|socket|compaction|conversations|gateway|command)/' },
    },
    {
      name: 'server-shared-parts-are-the-ground',
      severity: 'error',
      comment:
        'Server floor rule: keys/, tools/, observe/, stores/ and gateway-packages.ts, which every floor uses, import nothing of the floors above them.',
      from: { path: '^src/server/(keys/|tools/|observe/|stores/|gateway-packages\\.ts)' },
      to: { path: '^src/server/(pipeline|chat|responses|messages|background|socket|compaction|conversations|gateway|command)/' },
    },
    {
      name: 'server-stores-are-the-bottom',
      severity: 'error',
      comment: 'Server floor rule: stores/ imports nothing else of server/ (the keys\' Redis limiter uses its connection kit, not the other way).',
      from: { path: '^src/server/stores/' },
      to: { path: '^src/server/', pathNot: '^src/server/stores/' },
    },
    {
      name: 'parser-entries-load-no-gateway',
      severity: 'error',
      comment:
        'Dependencies by entry: harmony-stream, harmony-stream/engines and harmony-stream/ai-sdk do not load the gateway (server/), nor its WebSocket transport.',
      from: { path: '^src/(index|engines|http|ai-sdk)\\.ts$' },
      to: { path: '^src/server/' },
    },
    {
      name: 'gateway-packages-only-in-the-gateway',
      severity: 'error',
      comment:
        "Dependencies by entry: only the gateway (server/) uses its packages (ws, pino, prom-client, @opentelemetry/api), harmony-stream-gateway's dependencies, which a parser user does not install.",
      from: { path: '^src/', pathNot: '^src/server/' },
      to: { path: '(^|/)node_modules/(ws|@types/ws|pino|prom-client|@opentelemetry/api)/' },
    },
    {
      name: 'gateway-packages-load-in-their-one-module',
      severity: 'error',
      comment:
        'Dependencies by entry: the gateway loads its packages in server/gateway-packages.ts alone (from harmony-stream-gateway\'s folder, or one line saying to install it); elsewhere in server/ they are type-only imports.',
      from: { path: '^src/server/', pathNot: '^src/server/gateway-packages\\.ts$' },
      to: { path: '(^|/)node_modules/(ws|pino|prom-client|@opentelemetry/api)/', dependencyTypesNot: ['type-only'] },
    },
    {
      name: 'optional-packages-in-their-one-module',
      severity: 'error',
      comment:
        'Dependencies by entry: the optional packages (the stores\' drivers, the schema validator) are loaded by the one module that needs each, through requireOptional, so importing the package loads none of them.',
      from: { path: '^src/', pathNot: '^src/(server/stores/redis-connection|server/stores/sqlite-store|wire/schema-check)\\.ts$' },
      to: { path: '^node_modules/(@redis|node-sqlite3-wasm|@cfworker)/' },
    },
    {
      name: 'ai-sdk-is-the-top-layer',
      severity: 'error',
      comment: 'Layer rule: ai-sdk/ (the Vercel AI SDK provider) sits on all the others; nothing below it imports it, and only it imports @ai-sdk/provider.',
      from: { path: '^src/(base|backend|api|render|wire|engines|http)/' },
      to: { path: ['^src/ai-sdk/', '@ai-sdk/'] },
    },
    {
      name: 'js-backend-does-not-import-native',
      severity: 'error',
      comment: 'Backend rule: backend/js/ and backend/native.ts are two implementations of one protocol and do not import each other.',
      from: { path: '^src/backend/js/' },
      to: { path: '^src/backend/native\\.ts$' },
    },
    {
      name: 'native-backend-does-not-import-js',
      severity: 'error',
      comment: 'Backend rule: backend/js/ and backend/native.ts are two implementations of one protocol and do not import each other.',
      from: { path: '^src/backend/native\\.ts$' },
      to: { path: '^src/backend/js/' },
    },
    {
      name: 'no-unresolvable-import',
      severity: 'error',
      comment: 'Every import in src/ resolves (a typo in a path is otherwise only found by the build).',
      from: { path: '^src/' },
      to: { couldNotResolve: true },
    },
  ],
  options: {
    // Type-only imports are dependencies too: a type cycle still ties two modules together.
    tsPreCompilationDeps: true,
    tsConfig: { fileName: 'tsconfig.json' },
    doNotFollow: { path: 'node_modules' },
    exclude: { path: '\\.d\\.ts$' },
  },
}
