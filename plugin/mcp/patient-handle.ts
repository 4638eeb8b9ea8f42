/**
 * The opaque handle that names a patient to an MCP client in de-identified answers. The FHIR id is itself an
 * identifier (the de-identified text replaces it), and the pseudonyms (`[PATIENT-1]`) are per patient, so they
 * cannot tell one patient from another: the client gets, and passes back as `patient_id`, a deterministic
 * encryption of the id instead. AES-256-GCM under a key derived from the server's de-identification key, its nonce
 * an HMAC of what it encrypts (as SIV does): the same patient gets the same handle at every call, on every instance,
 * and nothing of the id can be read out of it. The project and the caller are the cipher's associated data, so a
 * handle works only for the caller it was given to, in its project; a forged or altered one fails to decrypt.
 */
import { createCipheriv, createDecipheriv, createHmac, hkdfSync } from 'node:crypto';

const NONCE_BYTES = 12;
const TAG_BYTES = 16;
/** What a handle starts with: tells it from a FHIR id, and names the form should it ever change. */
const PREFIX = 'ph1_';
const HANDLE_PATTERN = /^ph1_[A-Za-z0-9_-]{40,200}$/;

/** Handles of one caller in one project. */
export class PatientHandles {
  readonly #encryptionKey: Buffer;
  readonly #nonceKey: Buffer;
  readonly #scope: Buffer;

  /** `key`: the server's de-identification key; `projectId` and `caller` (a reference) bind the handles. */
  constructor(key: string, projectId: string, caller: string) {
    this.#encryptionKey = Buffer.from(hkdfSync('sha256', key, 'fhirgate', 'MCP patient handle: encryption', 32));
    this.#nonceKey = Buffer.from(hkdfSync('sha256', key, 'fhirgate', 'MCP patient handle: nonce', 32));
    this.#scope = Buffer.from(`${projectId}\n${caller}`, 'utf8');
  }

  /** Whether `text` has a handle's form (it may still be forged). */
  static looksLikeHandle(text: string): boolean {
    return HANDLE_PATTERN.test(text);
  }

  /** The handle of the patient `patientId`. */
  handleOf(patientId: string): string {
    const plain = Buffer.from(patientId, 'utf8');
    const nonce = createHmac('sha256', this.#nonceKey).update(this.#scope).update('\n').update(plain).digest().subarray(0, NONCE_BYTES);
    const cipher = createCipheriv('aes-256-gcm', this.#encryptionKey, nonce);
    cipher.setAAD(this.#scope);
    const sealed = Buffer.concat([cipher.update(plain), cipher.final()]);
    return PREFIX + Buffer.concat([nonce, sealed, cipher.getAuthTag()]).toString('base64url');
  }

  /** The patient id a handle names; undefined for a handle that is not this caller's in this project, or forged. */
  patientIdOf(handle: string): string | undefined {
    if (!PatientHandles.looksLikeHandle(handle)) {
      return undefined;
    }
    const bytes = Buffer.from(handle.slice(PREFIX.length), 'base64url');
    if (bytes.length <= NONCE_BYTES + TAG_BYTES) {
      return undefined;
    }
    try {
      const decipher = createDecipheriv('aes-256-gcm', this.#encryptionKey, bytes.subarray(0, NONCE_BYTES));
      decipher.setAAD(this.#scope);
      decipher.setAuthTag(bytes.subarray(bytes.length - TAG_BYTES));
      const plain = Buffer.concat([decipher.update(bytes.subarray(NONCE_BYTES, bytes.length - TAG_BYTES)), decipher.final()]).toString('utf8');
      // The nonce is the plaintext's HMAC: a handle must be the one this server makes for the id, not merely one that decrypts.
      return this.handleOf(plain) === handle ? plain : undefined;
    } catch {
      return undefined;
    }
  }
}
