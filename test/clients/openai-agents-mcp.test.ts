/**
 * An agent of the OpenAI Agents SDK whose model is fhirgate's chat completions and whose tools are fhirgate's MCP
 * server, both under the same user's token: the model (the emulator, through /v1/chat/completions) calls
 * find_patients, then search_patient_records for the patient found, then answers. The SDK runs the calls over MCP
 * (`MCPServerStreamableHttp`, on `@modelcontextprotocol/client`); each disclosure is on record naming the patient,
 * the user and the agent as MCP client, and each chat turn is a Communication. Under AI_MCP_PATIENT_DATA=refuse the
 * model is given the refusals and nothing is disclosed.
 */
import { Agent, MCPServerStreamableHttp, OpenAIChatCompletionsModel, Runner, setTracingDisabled } from '@openai/agents';
import type { AuditEvent, Project } from '@medplum/fhirtypes';
import OpenAI from 'openai';
import { MCP_PATIENT_DATA_SETTING } from '../../plugin/mcp/mcp-patient-data.ts';
import { seedChart, type SeededChart } from '../support/seeded-chart.ts';
import { CHAT_MODEL, startClientMatrix, type ClientMatrix, type MatrixSession } from './client-matrix.ts';

/** The name the agent's MCP client declares (the SDK sends version 1.0.0 with it). */
const MCP_CLIENT_NAME = 'fhirgate-chart';

describe('client: an OpenAI Agents SDK agent on fhirgate’s chat completions, with fhirgate’s MCP tools', () => {
  let matrix: ClientMatrix;
  let session: MatrixSession;
  let chart: SeededChart;
  let patientId: string;
  let mcpServer: MCPServerStreamableHttp | undefined;

  beforeAll(async () => {
    setTracingDisabled(true);
    matrix = await startClientMatrix();
  });
  afterAll(() => matrix.close());
  beforeEach(async () => {
    matrix.emulator.reset();
    session = await matrix.signIn();
    chart = await seedChart(await matrix.host.standalone.host.getSystemRepo(session.project.projectId), session.project);
    patientId = session.project.ids['patient-in-care-team-1'];
    mcpServer = undefined;
  });
  afterEach(() => mcpServer?.close());

  /** Sets the project's rule for MCP clients; before the agent's first call (the host keeps a token's project for a while). */
  const setRule = async (value: string): Promise<void> => {
    const stored = await matrix.host.store.readResource<Project>('Project', session.project.projectId);
    await matrix.host.store.updateResource<Project>({ ...stored, setting: [...(stored.setting ?? []), { name: MCP_PATIENT_DATA_SETTING, valueString: value }] });
  };

  /** The question, with the emulator's script: find the patient, search her heart rate, then answer. */
  const question = (): string => {
    const behaviour = {
      toolCalls: [
        [{ name: 'find_patients', arguments: { name: 'Lopez' } }],
        [{ name: 'search_patient_records', arguments: { patient_id: patientId, resource_type: 'Observation', params: { code: 'http://loinc.org|8867-4', _sort: '-date' } } }],
      ],
    };
    return `What was Maria Lopez's last heart rate? [emulator-behaviour ${JSON.stringify(behaviour)}]`;
  };

  /** Runs the agent as a user would set it up: one token for the chat completions and the MCP server. */
  const runAgent = async (prompt: string): Promise<{ finalOutput: unknown; itemTypes: string[] }> => {
    const token = await session.apiKey();
    const openai = new OpenAI({ baseURL: session.baseURL, apiKey: token, defaultHeaders: session.headers, maxRetries: 0 });
    mcpServer = new MCPServerStreamableHttp({
      name: MCP_CLIENT_NAME,
      url: `${matrix.host.url}projects/${session.project.projectId}/mcp`,
      requestInit: { headers: { Authorization: `Bearer ${token}` } },
      cacheToolsList: true,
    });
    await mcpServer.connect();
    const agent = new Agent({
      name: 'Chart assistant',
      instructions: 'Answer clinicians’ questions about their patients from the chart tools.',
      model: new OpenAIChatCompletionsModel(openai, CHAT_MODEL),
      mcpServers: [mcpServer],
    });
    const result = await new Runner().run(agent, prompt);
    return { finalOutput: result.finalOutput, itemTypes: result.newItems.map((item) => item.type) };
  };

  /** The tool results as the model received them, one list per request to the emulator. */
  const toolResultsSent = (): string[][] => matrix.emulator.received.map((request) => request.messages.filter((message) => message.role === 'tool').map((message) => message.content));
  const auditsOf = (id: string): Promise<AuditEvent[]> => session.medplum.searchResources('AuditEvent', { entity: `Patient/${id}`, _sort: 'date' }, { cache: 'no-cache' });

  test('the agent finds the patient, searches her records over MCP and answers; each disclosure and each turn is on record', async () => {
    await setRule('allow');
    const prompt = question();
    const { finalOutput, itemTypes } = await runAgent(prompt);

    expect(finalOutput).toBe(`Echo: ${prompt}`);
    expect(itemTypes).toEqual(['tool_call_item', 'tool_call_output_item', 'tool_call_item', 'tool_call_output_item', 'message_output_item']);
    // The model was offered fhirgate's MCP tools, and got their answers through fhirgate's chat completions.
    expect(matrix.emulator.received).toHaveLength(3);
    expect(matrix.emulator.received[0].tools.map((tool) => tool.name).sort()).toEqual(['find_patients', 'get_patient_summary', 'read_record', 'search_patient_records']);
    const [first, second, third] = toolResultsSent();
    expect(first).toEqual([]);
    expect(second).toHaveLength(1);
    expect(second[0]).toContain(patientId);
    expect(second[0]).toContain('Maria Lopez');
    expect(third).toHaveLength(2);
    expect(third[1]).toContain(chart.pulse.id);
    expect(third[1]).toContain('"value":72');
    expect(third[1]).not.toContain(chart.hba1c.id);

    // One disclosure per tool answer, naming the patient, the user and the agent's MCP client.
    const audits = await auditsOf(patientId);
    expect(audits).toHaveLength(2);
    for (const audit of audits) {
      expect(audit.agent[0]).toMatchObject({ who: { reference: `Practitioner/${session.project.ids.practitioner}` }, requestor: true });
      expect(audit.agent[1]).toMatchObject({ who: { display: `MCP client: ${MCP_CLIENT_NAME} 1.0.0` }, requestor: false });
      expect(audit.entity?.find((entity) => entity.role?.code === '1')?.what?.reference).toBe(`Patient/${patientId}`);
    }
    expect(audits[1].entity?.filter((entity) => entity.role?.code === '4').map((entity) => entity.what?.reference)).toEqual([`Observation/${chart.pulse.id}`]);
    expect(audits.map((audit) => audit.outcomeDesc)).toEqual([expect.stringContaining('find_patients'), expect.stringContaining('search_patient_records')]);

    // The chat's side: one conversation, each call and each result a turn.
    const [conversation, ...others] = await session.conversations();
    expect(others).toEqual([]);
    expect(conversation).toEqual([
      `prompt: ${prompt}`,
      'reply: calls find_patients({"name":"Lopez"})',
      expect.stringMatching(/^prompt: result call_1_0: .*Maria Lopez/),
      expect.stringMatching(/^reply: calls search_patient_records\(\{"patient_id":"[^"]+","resource_type":"Observation"/),
      expect.stringMatching(new RegExp(`^prompt: result call_2_0: .*${chart.pulse.id}`)),
      `reply: Echo: ${prompt}`,
    ]);
  });

  test('under AI_MCP_PATIENT_DATA=refuse the tool results the model gets are the refusal, and nothing is disclosed', async () => {
    await setRule('refuse');
    const prompt = question();
    const { finalOutput } = await runAgent(prompt);

    expect(finalOutput).toBe(`Echo: ${prompt}`);
    const results = toolResultsSent().flat();
    expect(results.length).toBeGreaterThan(0);
    for (const result of results) {
      expect(result).toContain(MCP_PATIENT_DATA_SETTING);
      expect(result).not.toContain('Lopez');
      expect(result).not.toContain(chart.pulse.id);
    }
    expect(await auditsOf(patientId)).toHaveLength(0);
  });
});
