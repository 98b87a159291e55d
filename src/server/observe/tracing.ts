/**
 * OpenTelemetry tracing through `@opentelemetry/api` alone: the gateway makes spans, and an application that
 * registers an SDK (a tracer provider, a propagator, an exporter) gets them; without one every call here is the
 * API's no-op. A request is one server span (its parent: the client's W3C `traceparent`, when the registered
 * propagator reads one), with children for its preparation (render, and the wait for a render worker), its
 * generation (the engine request; its first token an event) and each store operation. The engine request
 * carries the trace on: the generation span's context as `traceparent`/`tracestate` (vLLM's server reads them:
 * vllm/tracing.py, `TRACE_HEADERS`, `extract_trace_context`), or, with no propagator registered, the client's own
 * headers as they came.
 */
import type { IncomingHttpHeaders } from 'node:http'

import type { Context, Span } from '@opentelemetry/api'
import { context, propagation, ROOT_CONTEXT, SpanKind, SpanStatusCode, trace } from '../gateway-packages'

import type { StepWatcher } from './watch'

const tracer = trace.getTracer('harmony-stream')

/** The trace headers an engine request carries on. */
export interface TraceHeaders {
  traceparent?: string
  tracestate?: string
}

/** A request's server span, started; `context` is what its children start under. */
export function requestSpan(method: string, route: string, headers: IncomingHttpHeaders): { span: Span; context: Context } {
  const parent = propagation.extract(ROOT_CONTEXT, headers)
  const span = tracer.startSpan(
    `${method} ${route}`,
    { kind: SpanKind.SERVER, attributes: { 'http.request.method': method, 'http.route': route } },
    parent,
  )
  return { span, context: trace.setSpan(parent, span) }
}

/** Ends a request's span with its status (5xx: an error). */
export function endRequestSpan(span: Span, status: number): void {
  span.setAttribute('http.response.status_code', status)
  if (status >= 500) span.setStatus({ code: SpanStatusCode.ERROR })
  span.end()
}

/** Runs `work` in a child span of the active context named `name`, ended (with an error status) when it settles. */
export async function inSpan<T>(name: string, work: () => Promise<T>, attributes: Record<string, string | number> = {}): Promise<T> {
  const span = tracer.startSpan(name, { attributes })
  try {
    return await context.with(trace.setSpan(context.active(), span), work)
  } catch (error) {
    span.recordException(error as Error)
    span.setStatus({ code: SpanStatusCode.ERROR })
    throw error
  } finally {
    span.end()
  }
}

/**
 * A generation's span (`engine`), started now under the active context, and the trace headers for its engine
 * request: the span's own when a propagator is registered, else the client's (`incoming`) as they came.
 */
export function generationSpan(engine: string, promptTokens: number, incoming: IncomingHttpHeaders): { span: Span; headers: TraceHeaders } {
  const span = tracer.startSpan('generate', {
    kind: SpanKind.CLIENT,
    attributes: { 'gen_ai.system': engine, 'gen_ai.usage.input_tokens': promptTokens },
  })
  const carrier: Record<string, string> = {}
  propagation.inject(trace.setSpan(context.active(), span), carrier)
  const headers: TraceHeaders = {}
  const traceparent = carrier.traceparent ?? single(incoming.traceparent)
  const tracestate = carrier.traceparent === undefined ? single(incoming.tracestate) : carrier.tracestate
  if (traceparent !== undefined) headers.traceparent = traceparent
  if (tracestate !== undefined) headers.tracestate = tracestate
  return { span, headers }
}

function single(value: string | string[] | undefined): string | undefined {
  return typeof value === 'string' ? value : undefined
}

/** Watches a generation's steps in its span: the first token an event, the tokens counted, a failure recorded. */
export function spanWatcher(span: Span): StepWatcher {
  let generated = 0
  return {
    step: (step) => {
      if (generated === 0 && step.tokens.length > 0) span.addEvent('first_token')
      generated += step.tokens.length
    },
    end: (failure) => {
      if (failure !== null) {
        span.recordException(failure as Error)
        span.setStatus({ code: SpanStatusCode.ERROR })
      }
      span.setAttribute('gen_ai.usage.output_tokens', generated)
      span.end()
    },
  }
}
