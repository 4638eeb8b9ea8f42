/**
 * Where a link of Medplum's components leads inside the app. `@medplum/react` draws a record's link as
 * `/<ResourceType>/<id>` (the Medplum app's address for it) and follows it with the `navigate` its provider is
 * given: in fhirgate's app that is the record page, `/records/<ResourceType>/<id>`, read as the signed-in user.
 */
import { isRecordAddress, recordPath } from './pages/shared-records.ts';

/** The app's path for a path Medplum's components navigate to. */
export function appPathOf(path: string): string {
  const [, resourceType, id, rest] = path.split(/[?#]/)[0].split('/');
  return rest === undefined && isRecordAddress(resourceType, id) ? recordPath({ resourceType, id }) : path;
}
