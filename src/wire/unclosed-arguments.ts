/**
 * Tool arguments the model left unclosed. gpt-oss sometimes ends a call's JSON one or more brackets short and
 * stops there (LM Studio bug tracker #942: fifteen `{`, fourteen `}`, no `<|call|>`); a client then drops the
 * call ("Unexpected end of content") and the agent loops. When the arguments are JSON but for closing brackets
 * at their end, those brackets are what the model left out.
 */

/**
 * The brackets that close `text` into JSON (`}`, `]}`…), or null when closing brackets alone do not make it
 * JSON: a string left open, a dangling `,` or `:`, or no bracket open at all. One pass over the text, and one
 * parse to confirm.
 */
export function missingClosers(text: string): string | null {
  const open: string[] = []
  let inString = false
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i)
    if (inString) {
      if (c === 0x5c)
        i++ // a backslash escapes the next character
      else if (c === 0x22) inString = false
    } else if (c === 0x22) inString = true
    else if (c === 0x7b) open.push('}')
    else if (c === 0x5b) open.push(']')
    else if (c === 0x7d || c === 0x5d) {
      // A bracket that closes nothing open, or the wrong one: no closing at the end mends that.
      if (open.pop() !== String.fromCharCode(c)) return null
    }
  }
  if (inString || open.length === 0) return null
  const closers = open.reverse().join('')
  try {
    JSON.parse(text + closers)
    return closers
  } catch {
    return null
  }
}
