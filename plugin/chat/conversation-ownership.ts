/**
 * Who may add turns to a conversation. A conversation is its starter's: the root records who started it (its
 * `sender`, written by fhirgate as the AI agent), and by default only that caller continues it, whoever else may read
 * it. Reading is the AccessPolicy's business (a care team reads every conversation about its patient); writing into
 * someone's conversation is not: the colleague's words would reach her model on her next turn as her own.
 *
 *   Project.setting AI_SHARED_CONVERSATIONS   `false` (default): only the starter continues a conversation; anyone
 *                                             else is refused (403 `conversation_not_owned`), nothing stored.
 *                                             `true`: anyone who may read the conversation and record prompts about
 *                                             its patient continues it; each caller's model is given the other
 *                                             users' turns attributed and quoted as data (quoted-turns.ts), never
 *                                             as the caller's own words.
 */
import type { Communication, Project, Reference } from '@medplum/fhirtypes';
import { AppError } from '../errors.ts';
import { misconfiguredSetting } from '../project-settings.ts';

/** The Project.setting that lets users continue each other's conversations. */
export const SHARED_CONVERSATIONS_SETTING = 'AI_SHARED_CONVERSATIONS';

/**
 * Whether the project shares conversations: `valueBoolean`, or `valueString` `true`/`false`; absent is false. Any
 * other value is a 503 naming the setting (the administrator's to fix), never a silent default.
 */
export function sharesConversations(project: Project): boolean {
  const entry = project.setting?.find((candidate) => candidate.name === SHARED_CONVERSATIONS_SETTING);
  if (entry === undefined) {
    return false;
  }
  if (typeof entry.valueBoolean === 'boolean') {
    return entry.valueBoolean;
  }
  const text = entry.valueString?.trim().toLowerCase();
  if (text === 'true' || text === 'false') {
    return text === 'true';
  }
  throw misconfiguredSetting(SHARED_CONVERSATIONS_SETTING, 'must be true or false');
}

/**
 * A stable key for a Communication party: its literal reference, or the logical reference fhirgate writes for a
 * caller R4 does not list as a party (caller-reference.ts).
 */
export function partyKey(party: Reference | undefined): string | undefined {
  if (party?.reference) {
    return party.reference;
  }
  const identifier = party?.identifier;
  return identifier?.value ? `${identifier.system ?? ''}|${identifier.value}` : undefined;
}

/** Whether `caller` (a party as fhirgate records it) started the conversation `root`. */
export function startedBy(root: Communication, caller: Reference): boolean {
  const starter = partyKey(root.sender);
  return starter !== undefined && starter === partyKey(caller);
}

/** Whether `caller` may add a turn to the conversation `root`: it started it, or the project shares conversations. */
export function mayContinue(root: Communication, caller: Reference, project: Project): boolean {
  return startedBy(root, caller) || sharesConversations(project);
}

/**
 * Refuses a turn in a conversation the caller did not start, unless the project shares conversations: 403
 * `conversation_not_owned`, before anything is stored or sent. `param` names the field that named the conversation.
 */
export function requireMayContinue(root: Communication & { id: string }, caller: Reference, project: Project, param = 'conversation_id'): void {
  if (mayContinue(root, caller, project)) {
    return;
  }
  throw new AppError(
    'conversation_not_owned',
    `Forbidden: conversation '${root.id}' was started by another user, and only its starter continues it in this project ` +
      `(a project administrator may share conversations with the project setting ${SHARED_CONVERSATIONS_SETTING}). Start a conversation of your own.`,
    { details: { param } }
  );
}
