/**
 * A reason the standalone host cannot start that the person starting it can act on (a folder another host holds,
 * a port in use): `main.ts` prints it as one line, `fhirgate cannot start: <message>`, and exits 1, never with a
 * stack trace.
 */
export class StartUpError extends Error {
  constructor(message: string, options?: ErrorOptions) {
    super(message, options);
    this.name = 'StartUpError';
  }
}
