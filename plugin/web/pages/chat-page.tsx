/**
 * The clinician's chat: their conversations in a side list (open one to read and continue it, or list one
 * patient's), a patient picker (a conversation about a patient keeps that patient, shown as Medplum's header), a
 * model picker that says what a turn about a patient does on each model, the reply as it streams in with the
 * records of the chart the model was given, a stop button, and errors in words a clinician reads.
 */
import { Alert, Button, Container, Grid, Group, Loader, Select, Stack, Text, Textarea, Title } from '@mantine/core';
import type { Patient } from '@medplum/fhirtypes';
import { useEffect, useState, type FormEvent, type JSX } from 'react';
import { useNavigate, useSearchParams } from 'react-router';
import { ChatMessage } from './chat-message.tsx';
import { ConversationList } from './conversation-list.tsx';
import { PatientPicker } from './patient-picker.tsx';
import { PatientBanner } from './patient-banner.tsx';
import { useChat } from './use-chat.ts';
import { useConversations } from './use-conversations.ts';
import { PATIENT_DATA_LABEL, useModels } from './use-models.ts';

// Mantine's red title on its light red is too faint for WCAG AA: the title takes red 9.
const READABLE_TITLE = { label: { color: 'var(--mantine-color-red-9)' } };

export function ChatPage(): JSX.Element {
  const navigate = useNavigate();
  const [search] = useSearchParams();
  const openId = search.get('conversation') ?? undefined;
  const { models, error: modelsError } = useModels();
  const [chosenModel, setChosenModel] = useState<string | null>(null);
  const model = chosenModel ?? models?.[0]?.id ?? null;
  const patientData = models?.find((candidate) => candidate.id === model)?.patientData;
  const { messages, patient, loading, sending, error, send, stop } = useChat(openId);
  const [chosenPatient, setChosenPatient] = useState<Patient>();
  const [filterPatient, setFilterPatient] = useState<Patient>();
  useEffect(() => setChosenPatient(undefined), [openId]);
  const [turns, setTurns] = useState(0);
  const conversations = useConversations(turns, filterPatient?.id);
  const patientDataModels = models?.filter((candidate) => candidate.patientData === 'cleared' || candidate.patientData === 'de-identified').map((candidate) => candidate.id);
  // A conversation about a patient stays about them; otherwise the patient chosen for the next turn, if any.
  const shownPatient = patient ?? (chosenPatient?.id ? { reference: `Patient/${chosenPatient.id}` } : undefined);
  const [prompt, setPrompt] = useState('');
  const [lastPrompt, setLastPrompt] = useState('');

  function sendPrompt(text: string): void {
    if (!model || !text || sending) {
      return;
    }
    setLastPrompt(text);
    send(model, text, { patientId: chosenPatient?.id, patientDataModels })
      .then((id) => {
        setTurns((count) => count + 1);
        if (id && id !== openId) {
          navigate(`/chat?conversation=${id}`, { replace: !openId });
        }
      })
      .catch(() => undefined);
  }

  function submit(event: FormEvent): void {
    event.preventDefault();
    if (prompt.trim() && !sending) {
      sendPrompt(prompt.trim());
      setPrompt('');
    }
  }

  return (
    <Container size="xl" py="md">
      <Stack>
        <Title order={1}>Chat</Title>
        <Grid>
          <Grid.Col span={{ base: 12, sm: 4, md: 3 }}>
            <ConversationList state={conversations} openId={openId} onFilter={setFilterPatient} filtered={Boolean(filterPatient)} />
          </Grid.Col>
          <Grid.Col span={{ base: 12, sm: 8, md: 9 }}>
            <Stack>
              {patient ? (
                <Text size="sm" c="gray.7">
                  This conversation is about this patient. To ask about another, start a new conversation.
                </Text>
              ) : (
                // A new conversation (or one about no patient yet) starts with no patient chosen.
                <PatientPicker key={openId ?? 'new'} label="Patient" description="Optional: the patient this conversation is about." onChange={setChosenPatient} disabled={sending} />
              )}
              {shownPatient && (
                <PatientBanner patient={shownPatient} />
              )}
              <Select
                label="Model"
                styles={{ description: { color: 'var(--mantine-color-gray-7)' } }}
                description={patientData ? `A question about a patient on this model: ${PATIENT_DATA_LABEL[patientData].replace('patient data: ', '')}.` : undefined}
                data={(models ?? []).map((candidate) => candidate.id)}
                renderOption={({ option }) => {
                  const data = models?.find((candidate) => candidate.id === option.value)?.patientData;
                  return (
                    <Stack gap={0}>
                      <Text size="sm">{option.label}</Text>
                      {data && <Text size="xs" c="gray.7">{PATIENT_DATA_LABEL[data]}</Text>}
                    </Stack>
                  );
                }}
                value={model}
                onChange={setChosenModel}
                allowDeselect={false}
                disabled={!models?.length}
              />
              {modelsError && <Alert color="red" styles={READABLE_TITLE} title="The models could not be listed">{modelsError}</Alert>}
              <Stack aria-label="Conversation" role="log" aria-busy={sending || loading}>
                {loading && <Loader size="sm" aria-label="Reading the conversation" />}
                {messages.map((message, index) => (
                  <ChatMessage key={index} message={message} streaming={sending && index === messages.length - 1} />
                ))}
              </Stack>
              {error && (
                <Alert color="red" styles={READABLE_TITLE} title={error.title}>
                  <Stack gap="xs" align="flex-start">
                    <Text size="sm">{error.message}</Text>
                    {error.retry && lastPrompt && (
                      <Button size="xs" variant="default" onClick={() => sendPrompt(lastPrompt)} disabled={sending}>
                        Try again
                      </Button>
                    )}
                  </Stack>
                </Alert>
              )}
              <form onSubmit={submit}>
                <Stack>
                  <Textarea
                    label="Message"
                    autosize
                    minRows={2}
                    value={prompt}
                    onChange={(event) => setPrompt(event.currentTarget.value)}
                    onKeyDown={(event) => {
                      if (event.key === 'Enter' && !event.shiftKey) {
                        submit(event);
                      }
                    }}
                  />
                  <Group justify="flex-end">
                    {sending && (
                      <Button variant="default" onClick={stop}>
                        Stop
                      </Button>
                    )}
                    <Button type="submit" loading={sending} disabled={!model || !prompt.trim()}>
                      Send
                    </Button>
                  </Group>
                </Stack>
              </form>
            </Stack>
          </Grid.Col>
        </Grid>
      </Stack>
    </Container>
  );
}
