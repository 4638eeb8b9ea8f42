/**
 * fhirgate's OpenAPI 3.1 description: every route the plugin serves, their request bodies (generated from the zod
 * schemas the routes validate with: request-schemas.ts), their answers and error bodies of each status, the
 * security schemes and fhirgate's own fields. One source: the plugin serves it (`GET /v1/openapi.json`,
 * `GET /fhirgate/openapi.json`), `npm run openapi` writes the same document to docs/openapi.json, and
 * test/openapi-conformance.test.ts validates real requests and answers of the standalone host against it.
 */
import { FHIRGATE_VERSION } from '../version.ts';
import { CHAT_SCHEMAS, errorCodesOf } from './chat-schemas.ts';
import { DEVICE_SCHEMAS } from './device-schemas.ts';
import { ANY_OBJECT, ref, type JsonSchema } from './json-schema.ts';
import { chatCompletionRequestSchema, deviceTokenRequestSchema, graphqlRequestSchema, responsesRequestSchema } from './request-schemas.ts';
import { RESPONSES_SCHEMAS } from './responses-schemas.ts';

/** An OpenAPI document, as JSON. */
export type OpenApiDocument = { readonly openapi: string; readonly paths: Readonly<Record<string, Readonly<Record<string, OpenApiOperation>>>> } & Readonly<Record<string, unknown>>;

/** An operation of the description. */
export interface OpenApiOperation {
  readonly operationId: string;
  readonly responses: Readonly<Record<string, unknown>>;
  readonly [field: string]: unknown;
}

/** The paths the description is served at. */
export const OPENAPI_PATHS = ['/v1/openapi.json', '/fhirgate/openapi.json'] as const;

// On `/v1` the project is named by X-Project-ID; under the project base URL (the second server) by the path, where
// the header may be left out. The credential is an access token or a ClientApplication's API key.
const CALLER = [{ medplumAccessToken: [], projectId: [] }, { clientKey: [], projectId: [] }, { medplumAccessToken: [] }, { clientKey: [] }, { clientBasicAuth: [] }];
// `/graphql` has no project base URL: a user names the project in X-Project-ID.
const DEVICE_OR_CALLER = [{ deviceToken: [] }, { medplumAccessToken: [], projectId: [] }, { clientKey: [], projectId: [] }, { clientBasicAuth: [], projectId: [] }];

// The MCP endpoint's messages are JSON-RPC 2.0, their shapes the MCP specification's.
const JSON_RPC_MESSAGE = { type: 'object', required: ['jsonrpc'], properties: { jsonrpc: { const: '2.0' } } };
const PROTECTED_RESOURCE_METADATA = {
  type: 'object',
  required: ['resource', 'authorization_servers'],
  properties: { resource: { type: 'string' }, authorization_servers: { type: 'array', items: { type: 'string' } }, bearer_methods_supported: { type: 'array', items: { type: 'string' } } },
};

/** Why each error status is answered, on the routes of `/v1` and the device token route. */
const ERROR_STATUSES: Readonly<Record<number, string>> = {
  400: 'Invalid request: the field at fault is named in `param` (nothing stored, no provider called).',
  401: 'No, a bad, expired or revoked token or API key (a rotated secret too); or no `X-Project-ID` on `/v1`.',
  403: "Not allowed: `X-Project-ID` or the project base URL is not the caller's project (or the two disagree), the AccessPolicy refuses, or a governance rule does (the code says which).",
  404: 'Not found: a conversation, response, model or route the caller cannot read.',
  405: 'A method the path does not serve (`GET /v1/chat/completions`, ...); `Allow` names the one it serves.',
  409: 'A request with the same `Idempotency-Key` is still running (`Retry-After: 1`); or the FHIR server refused a write as conflicting.',
  410: 'The FHIR server says a record the request needs was deleted.',
  412: 'The FHIR server refused a write on a precondition.',
  413: 'The body is larger than `maxBodyBytes`; or the FHIR server refused a record as too large.',
  422: 'The FHIR server refused a write on a business rule.',
  429: 'A limit of the caller, the device, a budget or the FHIR quota (`Retry-After`).',
  500: 'The LLM provider failed or timed out (`upstream_error`, `upstream_timeout`), after fhirgate\'s retries; or an internal error.',
  503: 'No provider configured, a setting fhirgate cannot read, or the server is shutting down or its store unavailable (`Retry-After`).',
};

/** Builds the description. */
export function buildOpenApiDocument(): OpenApiDocument {
  const turnErrors = [400, 401, 403, 404, 409, 410, 412, 413, 422, 429, 500, 503];
  return {
    openapi: '3.1.0',
    info: {
      title: 'fhirgate',
      version: FHIRGATE_VERSION,
      summary: 'An OpenAI-compatible AI gateway in a Medplum FHIR server: every prompt and reply is a FHIR Communication.',
      description:
        "OpenAI's chat-completions and Responses wire formats under `/v1` (with fhirgate's own fields: `conversation_id`, `patient_id`, `patient_context`, `communication_id`), the models and the usage report, the device token exchange and `/graphql` for devices. What fhirgate does with each request field, per provider, is in docs/api.md; errors have the spec's body `{error: {message, type, code, param}}` (`param` null when no one field is at fault) on `/v1` and the device token route, GraphQL errors on `/graphql`. Every error answer carries `x-should-retry`.",
      license: { name: 'Apache-2.0', identifier: 'Apache-2.0' },
    },
    servers: [
      { url: '/', description: 'The server fhirgate is mounted in: a Medplum server, or the standalone host. `/v1` routes need `X-Project-ID`.' },
      {
        url: '/projects/{project_id}',
        description:
          "The project base URL: every `/v1` route answers the same under `/projects/{project_id}/v1`, with no `X-Project-ID` needed (a header naming another project is 403). For clients that let a user set a base URL and a key, but no header.",
        variables: { project_id: { default: 'your-project-id', description: 'The Medplum project the requests act in.' } },
      },
      { url: 'http://localhost:8103', description: 'The standalone host of `npm start`.' },
    ],
    tags: [
      { name: 'chat', description: 'Chat completions and the Responses API: each request is a turn of a conversation, recorded as FHIR Communications.' },
      { name: 'models', description: 'The models the caller may use.' },
      { name: 'governance', description: "The usage report and the project's governance settings." },
      { name: 'devices', description: 'The device token exchange and GraphQL for devices.' },
      { name: 'mcp', description: "The MCP server on the chat's FHIR tools, and its protected-resource metadata." },
      { name: 'description', description: 'This description.' },
    ],
    paths: {
      '/v1/chat/completions': {
        post: {
          operationId: 'createChatCompletion',
          tags: ['chat'],
          summary: 'A turn of a conversation, in the chat-completions wire format',
          description:
            "Stores the prompt as an `ai-prompt` Communication, calls the provider with the conversation's history, answers as JSON or Server-Sent Events, and stores the reply as an `ai-response` Communication. The token and `X-Project-ID` are checked before the body is read.",
          security: CALLER,
          parameters: [{ $ref: '#/components/parameters/IdempotencyKey' }],
          requestBody: { required: true, content: { 'application/json': { schema: ref('ChatCompletionRequest') } } },
          responses: {
            '200': {
              description: 'The reply: one `chat.completion` object, or, with `stream: true`, `chat.completion.chunk` events ending with `data: [DONE]`.',
              headers: { 'X-Conversation-ID': { $ref: '#/components/headers/ConversationId' } },
              content: { 'application/json': { schema: ref('ChatCompletion') }, 'text/event-stream': { schema: ref('ChatCompletionStreamEvent') } },
            },
            ...errorResponses(turnErrors),
          },
        },
      },
      '/v1/responses': {
        post: {
          operationId: 'createResponse',
          tags: ['chat'],
          summary: 'A turn of a conversation, in the Responses wire format',
          description: 'The same turn as a chat completion (the same records, governance and guarantees), answered as a Response object or its event stream.',
          security: CALLER,
          parameters: [{ $ref: '#/components/parameters/IdempotencyKey' }],
          requestBody: { required: true, content: { 'application/json': { schema: ref('ResponsesRequest') } } },
          responses: {
            '200': {
              description: 'The Response object, or, with `stream: true`, its events.',
              headers: { 'X-Conversation-ID': { $ref: '#/components/headers/ConversationId' } },
              content: { 'application/json': { schema: ref('Response') }, 'text/event-stream': { schema: ref('ResponseStreamEvent') } },
            },
            ...errorResponses(turnErrors),
          },
        },
      },
      '/v1/responses/{id}': {
        get: {
          operationId: 'getResponse',
          tags: ['chat'],
          summary: 'A stored response, read under the caller\'s AccessPolicy',
          security: CALLER,
          parameters: [
            { name: 'id', in: 'path', required: true, schema: { type: 'string', pattern: '^resp_' } },
            { name: 'stream', in: 'query', required: false, schema: { type: 'string', enum: ['true', 'false'] }, description: '`true`: the response as its event stream.' },
            { name: 'starting_after', in: 'query', required: false, schema: { type: 'integer', minimum: -1 }, description: 'With `stream=true`: the events after this sequence number.' },
            { name: 'include', in: 'query', required: false, schema: { type: 'string', enum: ['reasoning.encrypted_content'] } },
          ],
          responses: {
            '200': {
              description: 'The Response object, or its events.',
              headers: { 'X-Conversation-ID': { $ref: '#/components/headers/ConversationId' } },
              content: { 'application/json': { schema: ref('Response') }, 'text/event-stream': { schema: ref('ResponseStreamEvent') } },
            },
            ...errorResponses([400, 401, 403, 404, 429, 503]),
          },
        },
      },
      '/v1/models': {
        get: {
          operationId: 'listModels',
          tags: ['models'],
          summary: 'The models the caller may use',
          security: CALLER,
          responses: { '200': { description: 'The model list.', content: { 'application/json': { schema: ref('ModelList') } } }, ...errorResponses([401, 403, 429, 503]) },
        },
      },
      '/v1/models/{id}': {
        get: {
          operationId: 'retrieveModel',
          tags: ['models'],
          summary: 'One model the caller may use',
          security: CALLER,
          parameters: [{ name: 'id', in: 'path', required: true, schema: { type: 'string' }, description: '`provider/model`; the slash as it is or encoded (`%2F`).' }],
          responses: { '200': { description: 'The model.', content: { 'application/json': { schema: ref('Model') } } }, ...errorResponses([401, 403, 404, 429, 503]) },
        },
      },
      '/v1/usage': {
        get: {
          operationId: 'getUsageReport',
          tags: ['governance'],
          summary: 'The usage report of the replies the caller may read (a project administrator: every reply)',
          security: CALLER,
          parameters: [
            { name: 'start', in: 'query', required: false, schema: { type: 'string', format: 'date' }, description: 'First day (UTC); default: the first of this month.' },
            { name: 'end', in: 'query', required: false, schema: { type: 'string', format: 'date' }, description: 'Last day (UTC); default: today. At most 366 days.' },
            { name: 'group_by', in: 'query', required: false, schema: { type: 'string' }, description: '`user`, `model` and `day`, comma separated; default all three; empty: totals only.' },
          ],
          responses: { '200': { description: 'The report.', content: { 'application/json': { schema: ref('UsageReport') } } }, ...errorResponses([400, 401, 403, 429, 503]) },
        },
      },
      '/v1/governance': {
        get: {
          operationId: 'getGovernance',
          tags: ['governance'],
          summary: "The project's governance settings, for every member",
          security: CALLER,
          responses: { '200': { description: 'The settings.', content: { 'application/json': { schema: ref('Governance') } } }, ...errorResponses([400, 401, 403, 429, 503]) },
        },
      },
      '/v1/openapi.json': {
        get: {
          operationId: 'getOpenApiDescription',
          tags: ['description'],
          summary: 'This description (also at `/fhirgate/openapi.json`)',
          security: [],
          responses: { '200': { description: 'The OpenAPI 3.1 description.', content: { 'application/json': { schema: ANY_OBJECT } } } },
        },
      },
      '/fhirgate/openapi.json': {
        get: {
          operationId: 'getOpenApiDescriptionOutsideV1',
          tags: ['description'],
          summary: 'This description, at a path of its own beside a Medplum server\'s `/openapi.json`',
          security: [],
          responses: { '200': { description: 'The OpenAPI 3.1 description.', content: { 'application/json': { schema: ANY_OBJECT } } } },
        },
      },
      '/account/api/token/device/': {
        post: {
          operationId: 'exchangeDeviceToken',
          tags: ['devices'],
          summary: "A device's pre-registered API key for a short-lived device token",
          description: 'No bearer token: the credentials are in the body. A wrong key and an unknown device get the same 403; failed attempts lock out their source.',
          security: [],
          requestBody: { required: true, content: { 'application/json': { schema: ref('DeviceTokenRequest') } } },
          responses: {
            '200': { description: 'The token.', headers: { 'Cache-Control': { schema: { type: 'string', const: 'no-store' } } }, content: { 'application/json': { schema: ref('DeviceToken') } } },
            ...errorResponses([400, 403, 413, 429, 503]),
          },
        },
      },
      '/mcp': {
        post: {
          operationId: 'mcp',
          tags: ['mcp'],
          summary: "The MCP server (Streamable HTTP): find_patients, a patient's summary and the chat's FHIR tools, as the caller (docs/mcp.md)",
          description:
            'One JSON-RPC message of the Model Context Protocol per request. Each tool answers under the caller\'s AccessPolicy, and each result with records of a patient is recorded as an AuditEvent naming the MCP client. A 2025-11-25 client\'s `initialize` is answered with an `Mcp-Session-Id`, which it sends back so that its records name it (404 when the id is not the caller\'s session; DELETE with it ends it). Without a valid credential: 401 with `WWW-Authenticate: Bearer resource_metadata="..."`.',
          security: CALLER,
          requestBody: { required: true, content: { 'application/json': { schema: JSON_RPC_MESSAGE } } },
          responses: {
            '200': {
              description: 'The JSON-RPC response, as JSON or as a stream of messages.',
              headers: { 'Mcp-Session-Id': { description: "On the answer to a 2025-11-25 client's `initialize`: the session that keeps the client's name.", schema: { type: 'string' } } },
              content: { 'application/json': { schema: JSON_RPC_MESSAGE }, 'text/event-stream': { schema: JSON_RPC_MESSAGE } },
            },
            '202': { description: 'A notification, accepted.' },
            ...Object.fromEntries(
              ([[400], [401], [403], [404, 'The `Mcp-Session-Id` sent is not a session of the caller (ended, expired, never issued or another caller\'s).'], [406, '`Accept` does not take both `application/json` and `text/event-stream`.'], [413], [415, 'A `Content-Type` other than `application/json`.'], [429, '`mcpLimits.requestsPerMinute` or `chatLimits.maxConcurrentTurns` of the caller (`Retry-After`).'], [503]] as const).map(([status, description]) => [
                String(status),
                { description: description ?? ERROR_STATUSES[status], content: { 'application/json': { schema: JSON_RPC_MESSAGE } } },
              ])
            ),
          },
        },
      },
      '/.well-known/oauth-protected-resource/mcp': {
        get: {
          operationId: 'mcpProtectedResourceMetadata',
          tags: ['mcp'],
          summary: "The MCP endpoint's protected-resource metadata (RFC 9728), naming the Medplum server as its authorization server",
          security: [],
          responses: { '200': { description: 'The metadata document.', content: { 'application/json': { schema: PROTECTED_RESOURCE_METADATA } } } },
        },
      },
      '/graphql': {
        post: {
          operationId: 'graphql',
          tags: ['devices'],
          summary: "GraphQL on Medplum's engine, for devices (their Observations) and users",
          description:
            "A device sends its device token and may name only its Observations and its Device; a user sends a Medplum access token and `X-Project-ID`. Errors in the document itself are answered 200 with `errors`; a refused request keeps its HTTP status, with a GraphQL error whose `extensions.code` says why.",
          security: DEVICE_OR_CALLER,
          requestBody: { required: true, content: { 'application/json': { schema: ref('GraphqlRequest') } } },
          responses: Object.fromEntries(
            [200, 400, 401, 403, 413, 429, 500, 503].map((status) => [
              String(status),
              { description: status === 200 ? 'The result: `data`, and `errors` where there were any.' : ERROR_STATUSES[status], content: { 'application/json': { schema: ref('GraphqlResponse') } } },
            ])
          ),
        },
      },
    },
    components: {
      securitySchemes: {
        medplumAccessToken: {
          type: 'http',
          scheme: 'bearer',
          bearerFormat: 'JWT',
          description: "The caller's Medplum access token (any login: a user, a ClientApplication); the turn runs and is recorded as the caller, under the caller's AccessPolicy.",
        },
        projectId: {
          type: 'apiKey',
          in: 'header',
          name: 'X-Project-ID',
          description:
            "The project the request acts in: required beside the credential on `/v1` and `/graphql` (401 without it), optional under the project base URL (`/projects/{project_id}/v1`, which it must then agree with), and it must be the project of the credential's membership (403 otherwise).",
        },
        clientKey: {
          type: 'http',
          scheme: 'bearer',
          bearerFormat: '<client id>:<secret>',
          description:
            "A Medplum ClientApplication's id and secret written as one API key, for tools that hold a fixed key. Checked on every request as Medplum checks Basic auth (a rotated secret stops it at once); the turn runs and is recorded as that ClientApplication, under its membership's AccessPolicy.",
        },
        clientBasicAuth: { type: 'http', scheme: 'basic', description: "The same ClientApplication credentials as Medplum's own Basic auth (client id as the user name, secret as the password)." },
        deviceToken: { type: 'http', scheme: 'bearer', bearerFormat: 'JWT', description: 'A device token from `POST /account/api/token/device/` (HS256), for `/graphql` only.' },
      },
      parameters: {
        IdempotencyKey: {
          name: 'Idempotency-Key',
          in: 'header',
          required: false,
          schema: { type: 'string', pattern: '^[\\x21-\\x7e]{1,255}$' },
          description: 'The same key with the same request answers the recorded turn again (`Idempotent-Replayed: true`) instead of running a new one.',
        },
      },
      headers: {
        ConversationId: { description: 'The conversation the exchange belongs to.', schema: { type: 'string' } },
        ShouldRetry: { description: '`true` only where a retry may pass with nothing stored; the openai SDKs obey it.', required: true, schema: { type: 'string', enum: ['true', 'false'] } },
        RetryAfter: { description: 'Seconds to wait before retrying.', schema: { type: 'string' } },
      },
      responses: Object.fromEntries(Object.keys(ERROR_STATUSES).map((status) => [`Error${status}`, errorResponse(Number(status))])),
      schemas: {
        ChatCompletionRequest: chatCompletionRequestSchema(),
        ResponsesRequest: responsesRequestSchema(),
        DeviceTokenRequest: deviceTokenRequestSchema(),
        GraphqlRequest: graphqlRequestSchema(),
        ...CHAT_SCHEMAS,
        ...RESPONSES_SCHEMAS,
        ...DEVICE_SCHEMAS,
      },
    },
  };
}

/** The error answers of an operation, by status. */
function errorResponses(statuses: readonly number[]): Record<string, JsonSchema> {
  return Object.fromEntries(statuses.map((status) => [String(status), { $ref: `#/components/responses/Error${status}` }]));
}

/** The error answer of a status: the spec's body, with the codes of that status. */
function errorResponse(status: number): JsonSchema {
  const codes = errorCodesOf(status);
  return {
    description: `${ERROR_STATUSES[status]} Codes: ${codes.map((code) => `\`${code}\``).join(', ')}.`,
    headers: {
      'x-should-retry': { $ref: '#/components/headers/ShouldRetry' },
      'Retry-After': { $ref: '#/components/headers/RetryAfter' },
    },
    content: {
      'application/json': {
        schema: { allOf: [ref('ErrorResponse')], properties: { error: { properties: { code: { enum: codes } } } } },
      },
    },
  };
}

/** The text of docs/openapi.json: the document indented, so that a change reads as a diff. */
export function renderOpenApiFile(document: OpenApiDocument): string {
  return `${JSON.stringify(document, null, 2)}\n`;
}
