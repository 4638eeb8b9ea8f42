/**
 * Step 2 of a turn (chat-completion.ts): the prompt on record, after the root of a new conversation.
 */
import type { WithId } from '@medplum/core';
import type { FhirRepository } from '@medplum/fhir-router';
import type { Communication } from '@medplum/fhirtypes';
import { AppError } from '../errors.ts';
import type { CallerContext } from '../host.ts';
import type { ChatMessage } from '../llm/chat-model.ts';
import { outcomeStatusOf } from '../medplum-errors.ts';
import type { ChatServices } from './chat-completion.ts';
import type { ChatRequest } from './chat-request.ts';
import { buildConversationRoot, buildPrompt, type ConversationParties } from './communication-builders.ts';
import { communicationExists, requireStored } from './reply-records.ts';
import { mayCreate } from './write-permission.ts';

/**
 * Step 2: the prompt's Communication, after the root of a new conversation. The root is the AI agent's record
 * (users may not write roots or replies), the prompt the caller's, under the caller's AccessPolicy: two authors,
 * so two writes. A caller whose policy does not allow the prompt is refused before the root is written, where the
 * server's repository can tell (Medplum's and the standalone host's can); if the prompt is refused anyway, the
 * root is removed again. A store that fails for a passing reason is tried again a few times; if it still fails,
 * the request is refused (503) with nothing stored and the provider never called: a turn is accepted only once its
 * prompt is on record.
 */
export async function recordPrompt(services: ChatServices, caller: CallerContext, parties: ConversationParties, chat: ChatRequest, ids: PromptIds): Promise<void> {
  const { repo } = caller;
  const prompt: Communication & { id: string } = {
    ...buildPrompt(parties, { rootId: ids.rootId, messages: ids.input, requestBody: chat.body, sent: ids.sent, sideRequest: ids.sideRequest }),
    id: ids.promptId,
  };
  if (ids.isNew) {
    if (mayCreate(repo, caller.project.id, prompt) === false) {
      throw new AppError('forbidden', 'Forbidden: the AccessPolicy of the caller does not allow it to record a prompt in this conversation.');
    }
    const agentRepo = await requireStored(() => services.agents.repoFor(caller.project.id));
    const storedRoot = await createOnce(agentRepo, { ...buildConversationRoot(parties, ids.sent), id: ids.rootId });
    if (storedRoot) {
      await services.agents.rememberWritten(caller.project.id, storedRoot);
    }
  }
  try {
    await createOnce(repo, prompt);
  } catch (error) {
    if (ids.isNew) {
      await removeRoot(services, caller.project.id, ids.rootId);
    }
    throw error;
  }
}

/**
 * Creates `resource` with its id, retrying passing failures; a try whose answer was lost may have stored it: never
 * twice. Resolves the stored resource, or undefined when an earlier try turned out to have stored it.
 */
async function createOnce(repo: FhirRepository, resource: Communication & { id: string }): Promise<WithId<Communication> | undefined> {
  let tried = false;
  return requireStored(async () => {
    if (tried && (await communicationExists(repo, resource.id))) {
      return undefined;
    }
    tried = true;
    return repo.createResource(resource, { assignedId: true });
  });
}

/** Takes back the root of a new conversation whose first prompt was not stored: no conversation without a prompt. */
async function removeRoot(services: ChatServices, projectId: string, rootId: string): Promise<void> {
  try {
    await (await services.host.getSystemRepo(projectId)).deleteResource('Communication', rootId);
  } catch (error) {
    services.host.logger?.warn('fhirgate could not remove the root of a conversation whose first prompt was refused', {
      conversationId: rootId,
      status: outcomeStatusOf(error),
    });
  }
}

/** The ids the prompt (and the root of a new conversation) are written with, when it was sent, and what it holds. */
export interface PromptIds {
  readonly rootId: string;
  readonly promptId: string;
  /** True when the root is to be written too. */
  readonly isNew: boolean;
  readonly sent: string;
  /** The messages the turn adds to its conversation (turn-input.ts). */
  readonly input: readonly ChatMessage[];
  /** A side request about the conversation, not a turn of it (side-requests.ts). */
  readonly sideRequest?: boolean;
}
