/**
 * The plugin's options, validated once by `createFhirgatePlugin` and passed down. No global configuration:
 * two plugin instances in one process (as in the tests) never share settings.
 */
import { z } from 'zod';

/** Schema of the options a server passes to `createFhirgatePlugin`. */
export const fhirgateOptionsSchema = z.object({
  /** Largest JSON body the plugin's routes accept; larger bodies get 413 before they are parsed. */
  maxBodyBytes: z.number().int().positive().default(1024 * 1024),
});

/** Options as a server writes them (defaults may be left out). */
export type FhirgateOptionsInput = z.input<typeof fhirgateOptionsSchema>;

/** Options after validation, with every default filled in. */
export type FhirgateOptions = z.output<typeof fhirgateOptionsSchema>;

/** Validates options; a wrong option stops start-up with a message naming it. */
export function parseFhirgateOptions(input: FhirgateOptionsInput = {}): FhirgateOptions {
  const result = fhirgateOptionsSchema.safeParse(input);
  if (!result.success) {
    const problems = result.error.issues.map((issue) => `${issue.path.join('.') || '(options)'}: ${issue.message}`);
    throw new Error(`Invalid fhirgate options: ${problems.join('; ')}`);
  }
  return result.data;
}
