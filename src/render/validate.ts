/** Checks messages of the conversation model before rendering: a TypeError naming the field, never a bad prompt. */

import { BUILTIN_TOOLS } from './builtin-tools'
import type { ConversationMessage } from './conversation'
import type { FunctionTool } from './developer'
import { REASONING_EFFORTS } from './system'

function check(ok: boolean, fn: string, message: string): void {
  if (!ok) throw new TypeError(`${fn}: ${message}`)
}

const optionalString = (value: unknown) => value === undefined || typeof value === 'string'
const optionalText = (value: unknown) => value === undefined || value === null || typeof value === 'string'

export function validateConversation(messages: readonly ConversationMessage[], fn: string): void {
  check(Array.isArray(messages), fn, 'messages must be an array')
  messages.forEach((message: ConversationMessage, i) => {
    const at = `messages[${i}]`
    check(message !== null && typeof message === 'object', fn, `${at} must be an object`)
    const { role, content } = message
    if (role === 'system') {
      if (typeof content === 'string') return
      check(content !== null && typeof content === 'object', fn, `${at}.content must be a string or SystemContent`)
      for (const key of ['modelIdentity', 'knowledgeCutoff', 'currentDate'] as const) {
        check(optionalText(content[key]), fn, `${at}.content.${key} must be a string or null`)
      }
      const effort = content.reasoningEffort
      check(
        effort === undefined || effort === null || REASONING_EFFORTS.includes(effort),
        fn,
        `${at}.content.reasoningEffort must be 'low', 'medium' or 'high'`,
      )
      const { tools } = content
      check(
        tools === undefined || (Array.isArray(tools) && tools.every((tool) => BUILTIN_TOOLS.includes(tool))),
        fn,
        `${at}.content.tools must be an array of 'browser' and 'python'`,
      )
      return
    }
    if (role === 'developer') {
      if (typeof content === 'string') return
      check(content !== null && typeof content === 'object', fn, `${at}.content must be a string or DeveloperContent`)
      check(optionalText(content.instructions), fn, `${at}.content.instructions must be a string or null`)
      checkTools(content.tools, `${at}.content.tools`, fn)
      check(content.namespaces === undefined || Array.isArray(content.namespaces), fn, `${at}.content.namespaces must be an array`)
      content.namespaces?.forEach((namespace, j) => {
        const where = `${at}.content.namespaces[${j}]`
        check(
          namespace !== null &&
            typeof namespace === 'object' &&
            typeof namespace.name === 'string' &&
            /^[A-Za-z0-9_-]+$/.test(namespace.name),
          fn,
          `${where}.name must be letters, digits, '_' or '-'`,
        )
        check(namespace.name !== 'functions', fn, `${where}.name 'functions' is the namespace of content.tools`)
        check(optionalString(namespace.description), fn, `${where}.description must be a string`)
        check(Array.isArray(namespace.tools), fn, `${where}.tools must be an array`)
        checkTools(namespace.tools, `${where}.tools`, fn)
      })
      return
    }
    check(
      role === 'user' || role === 'assistant' || role === 'tool',
      fn,
      `${at}.role must be 'system', 'developer', 'user', 'assistant' or 'tool'`,
    )
    check(typeof content === 'string', fn, `${at}.content must be a string`)
    for (const key of ['name', 'recipient', 'channel', 'contentType'] as const) {
      check(optionalString(message[key]), fn, `${at}.${key} must be a string`)
    }
    check(
      role !== 'tool' || (typeof message.name === 'string' && message.name !== ''),
      fn,
      `${at}: a tool message needs its name (e.g. 'functions.get_weather')`,
    )
  })
}

/** A developer message's functions (its `tools`, or a namespace's): each with a name. */
function checkTools(tools: readonly FunctionTool[] | undefined, at: string, fn: string): void {
  check(tools === undefined || Array.isArray(tools), fn, `${at} must be an array`)
  tools?.forEach((tool, j) => {
    check(
      tool !== null && typeof tool === 'object' && typeof tool.name === 'string' && tool.name !== '',
      fn,
      `${at}[${j}].name must be a non-empty string`,
    )
    check(optionalString(tool.description), fn, `${at}[${j}].description must be a string`)
  })
}
