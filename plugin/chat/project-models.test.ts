import { describe, expect, test } from '@jest/globals';
import type { Project } from '@medplum/fhirtypes';
import { AppError } from '../errors.ts';
import type { ChatModel } from '../llm/chat-model.ts';
import { createModelRegistry } from '../llm/model-registry.ts';
import { parseProviderConfig } from '../llm/provider-config.ts';
import { apiKeySecretName, modelCatalogFor } from './project-models.ts';

// A fake provider client answers with the key it was made with, so a test sees which key a request would use.
const registry = createModelRegistry(
  parseProviderConfig({
    providers: {
      openai: { kind: 'openai', apiKey: 'sk-operator', models: ['gpt-4o-mini'] },
      'azure-east': { kind: 'azure-openai', baseUrl: 'https://east.example.test', models: ['gpt-4o'] },
      local: { kind: 'ollama', models: ['llama3.2'] },
    },
    defaultModel: 'openai/gpt-4o-mini',
  }),
  (provider, _settings, apiKey): ChatModel => ({
    provider,
    complete: async () => ({ text: apiKey ?? '(none)', finishReason: 'stop', usage: undefined }),
    stream: async function* () {
      yield { type: 'finish', finishReason: 'stop', usage: undefined };
    },
  }),
);

const request = { model: 'm', messages: [], maxTokens: 1, signal: new AbortController().signal };

function project(fields: Partial<Project> = {}): Project {
  return { resourceType: 'Project', id: 'p1', name: 'Clinic', ...fields };
}

async function keyUsedFor(catalogProject: Project, model?: string): Promise<string> {
  const resolved = modelCatalogFor(registry, catalogProject).resolve(model);
  return (await resolved.model.complete(request)).text;
}

describe('modelCatalogFor', () => {
  test('a project without settings gets the operator catalog itself', () => {
    expect(modelCatalogFor(registry, project())).toBe(registry);
    expect(modelCatalogFor(registry, project({ setting: [{ name: 'unrelated', valueString: 'x' }] }))).toBe(registry);
  });

  test('a project version’s catalog is made once; a new version, with its settings changed, gets its own', () => {
    const first = project({ id: 'versioned', meta: { versionId: 'v1' }, setting: [{ name: 'AI_MODELS', valueString: 'openai/gpt-4.1' }] });
    const catalog = modelCatalogFor(registry, first);
    expect(modelCatalogFor(registry, structuredClone(first))).toBe(catalog);
    // An administrator changed the setting: the server gives the project a new version, read at the next turn.
    const changed = project({ id: 'versioned', meta: { versionId: 'v2' }, setting: [{ name: 'AI_MODELS', valueString: 'local/llama3.2' }] });
    expect(modelCatalogFor(registry, changed).list().map((entry) => entry.id)).toEqual(['local/llama3.2']);
    // Another project with the same version id is another project.
    const other = project({ id: 'other', meta: { versionId: 'v1' }, setting: [{ name: 'AI_MODELS', valueString: 'openai/gpt-4o-mini' }] });
    expect(modelCatalogFor(registry, other).list().map((entry) => entry.id)).toEqual(['openai/gpt-4o-mini']);
  });

  test('AI_MODELS and AI_MODEL choose the project list and default', () => {
    const catalog = modelCatalogFor(
      registry,
      project({
        setting: [
          { name: 'AI_MODELS', valueString: ' openai/gpt-4.1 , local/llama3.2,, ' },
          { name: 'AI_MODEL', valueString: 'local/llama3.2' },
        ],
      }),
    );

    expect(catalog.list().map((entry) => entry.id)).toEqual(['openai/gpt-4.1', 'local/llama3.2']);
    expect(catalog.resolve(undefined).id).toBe('local/llama3.2');
    expect(() => catalog.resolve('openai/gpt-4o-mini')).toThrow(AppError);
  });

  test('a setting naming an unknown provider is a 503 naming the setting, not the request', () => {
    const error = (() => {
      try {
        modelCatalogFor(registry, project({ setting: [{ name: 'AI_MODELS', valueString: 'openai/gpt-4o, mistral/large' }] }));
      } catch (caught) {
        return caught;
      }
      return undefined;
    })();

    expect(error).toBeInstanceOf(AppError);
    expect(error).toMatchObject({ code: 'not_configured', status: 503, details: { setting: 'AI_MODELS' } });
    expect((error as AppError).message).toContain("'mistral/large'");
    expect(() => modelCatalogFor(registry, project({ setting: [{ name: 'AI_MODEL', valueString: 'gpt-4o' }] }))).toThrow(
      /AI_MODEL names 'gpt-4o'/,
    );
  });

  test('AI_API_KEY_<NAME> holds the key of one provider; the operator key stays for the others', async () => {
    expect(apiKeySecretName('azure-east')).toBe('AI_API_KEY_AZURE_EAST');
    const withKeys = project({ secret: [{ name: 'AI_API_KEY_AZURE_EAST', valueString: 'azure-project-key' }] });

    expect(await keyUsedFor(withKeys, 'azure-east/gpt-4o')).toBe('azure-project-key');
    expect(await keyUsedFor(withKeys, 'openai/gpt-4o-mini')).toBe('sk-operator');
    expect(await keyUsedFor(project(), 'local/llama3.2')).toBe('(none)');
  });

  test("AI_API_KEY is the key of the project's default provider; a named secret wins over it", async () => {
    const shared = project({
      setting: [{ name: 'AI_MODEL', valueString: 'azure-east/gpt-4o' }],
      secret: [{ name: 'AI_API_KEY', valueString: 'shared-key' }],
    });
    expect(await keyUsedFor(shared)).toBe('shared-key');
    expect(await keyUsedFor(shared, 'openai/gpt-4o-mini')).toBe('sk-operator');

    const both = project({
      secret: [
        { name: 'AI_API_KEY', valueString: 'shared-key' },
        { name: 'AI_API_KEY_OPENAI', valueString: 'named-key' },
      ],
    });
    expect(await keyUsedFor(both)).toBe('named-key');
  });

  test('a provider that needs a key and has none for this project answers 503', () => {
    expect(() => modelCatalogFor(registry, project()).resolve('azure-east/gpt-4o')).toThrow(
      expect.objectContaining({ code: 'not_configured', status: 503 }) as unknown as Error,
    );
  });
});
