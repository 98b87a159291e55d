/** Raw HTTP over a socket, for what an HTTP client library will not send: malformed requests, bodies never finished. */
import { once } from 'node:events'
import { connect } from 'node:net'

/**
 * Writes `bytes` to 127.0.0.1:`port` and collects the answer until the server closes the connection or
 * `waitMs` passes; `closed` says whether the server closed it.
 */
export async function exchange(port: number, bytes: string, waitMs = 3000): Promise<{ answer: string; closed: boolean }> {
  const socket = connect(port, '127.0.0.1')
  await once(socket, 'connect')
  let answer = ''
  socket.on('data', (d) => (answer += d))
  socket.on('error', () => {})
  socket.write(bytes)
  await Promise.race([once(socket, 'close'), new Promise((resolve) => setTimeout(resolve, waitMs))])
  const closed = socket.destroyed || socket.readableEnded
  socket.destroy()
  return { answer, closed }
}
