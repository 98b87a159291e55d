/**
 * Content a client carries and only this gateway may read or alter: compaction items (compaction.ts) and
 * reasoning items' `encrypted_content` (sealed-reasoning.ts). A value is JSON, deflated, then sealed with
 * AES-256-GCM under the gateway's key; each use binds its own purpose as associated data, so content sealed for
 * one use never opens as another. Opening content that is not ours (another key, altered, cut, another format
 * version) gives null: the caller says which item was wrong.
 */
import { createCipheriv, createDecipheriv, randomBytes } from 'node:crypto'
import { deflateRawSync, inflateRawSync } from 'node:zlib'

/** The first characters of every sealed content: this format, version 1 (another version is refused, not misread). */
const SEAL_PREFIX = 'hsc1.'
const IV_BYTES = 12
const TAG_BYTES = 16

/** What a purpose is called in the associated data: `harmony-stream compaction v1`, `harmony-stream reasoning v1`. */
export type SealPurpose = 'compaction' | 'reasoning'

/** What `open` gives for content that is ours but would open to more than `maxOpenedBytes`. */
export const OVERSIZED: unique symbol = Symbol('oversized')

export class Sealer {
  constructor(
    private readonly key: Buffer,
    /** The most an opened value may inflate to, in bytes (opening runs on the event loop). */
    readonly maxOpenedBytes: number,
    /** The longest sealed content made or taken, in characters. */
    readonly maxSealedLength: number,
  ) {}

  /**
   * `value` sealed for `purpose` (and for `owner`, an API key's name: then only the same owner opens it); null
   * when it is over either bound.
   */
  seal(purpose: SealPurpose, value: unknown, owner: string | null = null): string | null {
    const json = Buffer.from(JSON.stringify(value))
    // What is sealed must open: `open` inflates at most this much.
    if (json.length > this.maxOpenedBytes) return null
    const iv = randomBytes(IV_BYTES)
    const cipher = createCipheriv('aes-256-gcm', this.key, iv)
    cipher.setAAD(associated(purpose, owner))
    const body = Buffer.concat([cipher.update(deflateRawSync(json)), cipher.final()])
    const sealed = SEAL_PREFIX + Buffer.concat([iv, cipher.getAuthTag(), body]).toString('base64url')
    return sealed.length > this.maxSealedLength ? null : sealed
  }

  /**
   * The value sealed for `purpose` by this key; null for anything else; `OVERSIZED` for ours that would open to
   * more than `maxOpenedBytes` (sealed by a gateway with a larger bound): inflating stops there.
   */
  open(purpose: SealPurpose, sealed: string, owner: string | null = null): unknown {
    if (!sealed.startsWith(SEAL_PREFIX) || sealed.length > this.maxSealedLength) return null
    const bytes = Buffer.from(sealed.slice(SEAL_PREFIX.length), 'base64url')
    if (bytes.length < IV_BYTES + TAG_BYTES) return null
    try {
      const decipher = createDecipheriv('aes-256-gcm', this.key, bytes.subarray(0, IV_BYTES))
      decipher.setAAD(associated(purpose, owner))
      decipher.setAuthTag(bytes.subarray(IV_BYTES, IV_BYTES + TAG_BYTES))
      const deflated = Buffer.concat([decipher.update(bytes.subarray(IV_BYTES + TAG_BYTES)), decipher.final()])
      let json: Buffer
      try {
        json = inflateRawSync(deflated, { maxOutputLength: this.maxOpenedBytes })
      } catch (error) {
        if ((error as { code?: unknown }).code === 'ERR_BUFFER_TOO_LARGE') return OVERSIZED
        throw error
      }
      return JSON.parse(json.toString('utf8'))
    } catch {
      return null
    }
  }
}

/** The associated data: the purpose, and the owner when there is one (content sealed for one key opens for no other). */
function associated(purpose: SealPurpose, owner: string | null): Buffer {
  return Buffer.from(owner === null ? `harmony-stream ${purpose} v1` : `harmony-stream ${purpose} v1 owner ${owner}`)
}
