/** fhirgate's version, as in package.json: the instrumentation scope's version in metrics and traces. */
export const FHIRGATE_VERSION = '0.1.0';
