/**
 * The error hierarchy at the HTTP edge: each typed error becomes the OpenAI error body with its stable code;
 * an engine's failure is a 502 that tells the client what kind of failure it was and nothing of the engine
 * (its address, its own error text), which belong in the server's log.
 */
import test from 'ava'
import { HarmonyError, HarmonyRequestError } from 'harmony-stream'
import { EngineError } from 'harmony-stream/engines'
import {
  chatGenerationParameters,
  DEFAULT_MAX_MODEL_LENGTH,
  errorResponse,
  HttpError,
  responsesGenerationParameters,
} from 'harmony-stream/http'

test('an engine failure is a 502 with its code and a generic message: no URL, host or engine text reaches the client', (t) => {
  const codes = [
    'engine-http-error',
    'engine-connect-timeout',
    'engine-read-timeout',
    'engine-connection-error',
    'engine-protocol-error',
    'engine-stream-error',
    'engine-aborted',
  ]
  for (const code of codes) {
    const error = new EngineError(code, `vllm at http://10.1.2.3:8000/v1/completions answered 500: CUDA out of memory on gpu-node-7`, {
      engine: 'vllm',
      status: 500,
      engineMessage: 'CUDA out of memory on gpu-node-7',
    })
    const { status, body } = errorResponse(error)
    t.is(status, 502)
    // The same code, snake_case on the wire (OpenAI's style).
    t.is(body.error.code, code.replaceAll('-', '_'))
    t.is(body.error.type, 'server_error')
    t.notRegex(body.error.message, /10\.1\.2\.3|http|gpu-node|CUDA|vllm/, code)
    t.regex(body.error.message, /inference engine/)
  }
})

test('every error answers with its stable code: request errors 400, HTTP errors as set, anything else a generic 500', (t) => {
  t.deepEqual(errorResponse(new HarmonyRequestError('messages must be an array', 'messages')), {
    status: 400,
    body: { error: { message: 'messages must be an array', type: 'invalid_request_error', param: 'messages', code: 'invalid_request' } },
  })
  t.is(errorResponse(new HttpError(413, 'too big', { code: 'body-too-large' })).body.error.code, 'body_too_large')
  const internal = errorResponse(new HarmonyError('internal-error', 'harmony-stream internal error: a secret detail'))
  t.is(internal.status, 500)
  t.deepEqual(internal.body.error, { message: 'internal error', type: 'server_error', param: null, code: 'internal_error' })
  t.is(errorResponse(new Error('boom at /home/user/secret')).body.error.message, 'internal error')
})

test('model has a length cap (it is repeated in every chunk): a 400 naming it, configurable', (t) => {
  const long = 'm'.repeat(1_000_000)
  for (const parameters of [chatGenerationParameters, responsesGenerationParameters]) {
    const error = t.throws(() => parameters({ model: long }), { instanceOf: HttpError })
    t.is(error!.status, 400)
    t.is(error!.param, 'model')
    t.regex(error!.message, new RegExp(`at most ${DEFAULT_MAX_MODEL_LENGTH} characters`))
    t.is(parameters({ model: 'm'.repeat(DEFAULT_MAX_MODEL_LENGTH) }).model.length, DEFAULT_MAX_MODEL_LENGTH)
    t.is(parameters({ model: 'm'.repeat(1000) }, { maxModelLength: 1000 }).model.length, 1000)
    t.throws(() => parameters({ model: 'm' }, { maxModelLen: 3 } as never), {
      instanceOf: TypeError,
      message: /did you mean 'maxModelLength'/,
    })
  }
})
