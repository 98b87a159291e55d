/** Raw HTTP over a socket, for what an HTTP client library will not send: malformed requests, bodies never finished. */
import { once } from 'node:events'
import { connect } from 'node:net'

/**
 * Writes `bytes` to 127.0.0.1:`port` and collects the answer until the server closes the connection or
 * `waitMs` passes; `closed` says whether the server closed it. The default bound is one a loaded machine stays
 * within; a server that closes ends the wait at once.
 */
export async function exchange(port: number, bytes: string, waitMs = 30_000): Promise<{ answer: string; closed: boolean }> {
  const socket = connect(port, '127.0.0.1')
  await once(socket, 'connect')
  let answer = ''
  socket.on('data', (d) => (answer += d))
  socket.on('error', () => {})
  socket.write(bytes)
  // Unreferenced: once the server has closed, the bound does not keep the test process waiting.
  await Promise.race([once(socket, 'close'), new Promise((resolve) => setTimeout(resolve, waitMs).unref())])
  const closed = socket.destroyed || socket.readableEnded
  socket.destroy()
  return { answer, closed }
}
