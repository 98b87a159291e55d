import { createGateway } from 'harmony-stream/server'

const server = createGateway({
  replay: [[200005, 17196, 200008, 12194, 200002]], // your engine here
  apiKeys: [
    { key: process.env.TEAM_A_KEY ?? 'sk-team-a', name: 'team-a', limits: { concurrentStreams: 8, requestsPerMinute: 600 } },
    { sha256: 'f4a5d2b3fbba7ac34f71a0b4cbc1f4f28f6a5a1c8b79c4ea4d8d3f0b4c0c3e91', name: 'team-b' },
  ],
})
server.listen(8787, '127.0.0.1')
