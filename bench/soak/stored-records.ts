/**
 * What the soak's host stored, counted through its FHIR API as the demo integration (client credentials; its
 * AccessPolicy reads the audit trail and Observations): the prompts and replies of every turn, and the Observations
 * the device posted. The soak compares them with what its load was answered.
 */
import { CATEGORY, DEFAULT_CATEGORY_SYSTEM } from '../../plugin/chat/fhir-vocabulary.ts';

/** The category tokens of prompts and replies, as the demo host writes them. */
export const DEMO_CATEGORY_CODES = {
  prompt: `${DEFAULT_CATEGORY_SYSTEM}|${CATEGORY.prompt.code}`,
  reply: `${DEFAULT_CATEGORY_SYSTEM}|${CATEGORY.response.code}`,
} as const;

/** Records in the store. */
export interface StoredRecords {
  readonly prompts: number;
  readonly replies: number;
  readonly observations: number;
}

/** Counts the stored prompts, replies and Observations (`_total=accurate`). */
export async function countStored(
  baseUrl: string,
  client: { readonly client_id: string; readonly client_secret: string },
  categories: typeof DEMO_CATEGORY_CODES
): Promise<StoredRecords> {
  const tokenResponse = await fetch(new URL('oauth2/token', baseUrl), {
    method: 'POST',
    headers: { 'content-type': 'application/x-www-form-urlencoded' },
    body: new URLSearchParams({ grant_type: 'client_credentials', client_id: client.client_id, client_secret: client.client_secret }),
  });
  if (!tokenResponse.ok) {
    throw new Error(`client token: ${tokenResponse.status} ${await tokenResponse.text()}`);
  }
  const token = ((await tokenResponse.json()) as { access_token: string }).access_token;
  const total = async (query: string): Promise<number> => {
    const response = await fetch(new URL(`fhir/R4/${query}&_count=0&_total=accurate`, baseUrl), { headers: { authorization: `Bearer ${token}` } });
    const bundle = (await response.json()) as { total?: number };
    if (!response.ok || typeof bundle.total !== 'number') {
      throw new Error(`${query}: ${response.status} ${JSON.stringify(bundle).slice(0, 300)}`);
    }
    return bundle.total;
  };
  return {
    prompts: await total(`Communication?category=${encodeURIComponent(categories.prompt)}`),
    replies: await total(`Communication?category=${encodeURIComponent(categories.reply)}`),
    // Every Observation of the soak is the device's, status final.
    observations: await total('Observation?status=final'),
  };
}
