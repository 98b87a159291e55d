/**
 * `POST /v1/responses/compact`: the conversation (the stored response's items, then `input`) as its user
 * messages and one compaction item that seals all of it (`Compactor`). Rendered, so a conversation that
 * cannot be a prompt is refused here, not when it comes back; its prompt's tokens are the usage.
 */
import type { IncomingMessage, ServerResponse } from 'node:http'

import { readJsonBody } from '../../http/body'
import type { Feature } from '../pipeline/face'
import { renderOffLoop } from '../pipeline/prepared'
import { sendJson } from '../pipeline/send'
import { historyOf } from '../responses/continuation'
import { continuedBody } from '../responses/conversation'
import type { ResponsesGateway } from '../responses/responses-gateway'
import { type Compactor, checkCompactRequest } from './compactor'

/** What compaction reads of the gateway beyond what Responses does: the compactor itself, not only its opener. */
export interface CompactionGateway extends ResponsesGateway {
  compactor: Compactor
}

async function serveCompaction(gateway: CompactionGateway, request: IncomingMessage, response: ServerResponse): Promise<void> {
  const body = checkCompactRequest(await readJsonBody(request, { limit: gateway.bodyLimit }), { unknownFields: gateway.unknownFields })
  const previousId = body.previous_response_id
  const { opened, history, sources } = await historyOf(gateway, { previous_response_id: previousId, input: body.input ?? [] })
  const conversation = continuedBody(opened, history)
  const prompt = await renderOffLoop(gateway, 'responses', {
    model: body.model,
    instructions: body.instructions,
    input: conversation.input,
  })
  sendJson(
    response,
    200,
    gateway.compactor.compaction(
      conversation.input as Record<string, unknown>[],
      { inputTokens: prompt.promptTokens },
      {
        // The stored responses its items came from: the one it continues, and those of a compaction it opened.
        sources: [...(previousId == null ? [] : [String(previousId)]), ...sources],
        owner: gateway.caller?.name ?? null,
      },
    ),
  )
}

export const compactionFeature: Feature<CompactionGateway> = {
  routes: { '/v1/responses/compact': { POST: serveCompaction } },
}
