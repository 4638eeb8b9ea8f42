/**
 * The clinician's chat: their conversations in a side list (open one to read and continue it), a model picker
 * that says what a turn about a patient does on each model, the reply as it streams in, a stop button, and errors
 * in words a clinician reads.
 */
import { Alert, Button, Container, Grid, Group, Loader, Select, Stack, Text, Textarea, Title } from '@mantine/core';
import { useState, type FormEvent, type JSX } from 'react';
import { useNavigate, useSearchParams } from 'react-router';
import { ChatMessage } from './chat-message.tsx';
import { ConversationList } from './conversation-list.tsx';
import { useChat } from './use-chat.ts';
import { useConversations } from './use-conversations.ts';
import { PATIENT_DATA_LABEL, useModels } from './use-models.ts';

export function ChatPage(): JSX.Element {
  const navigate = useNavigate();
  const [search] = useSearchParams();
  const openId = search.get('conversation') ?? undefined;
  const { models, error: modelsError } = useModels();
  const [chosenModel, setChosenModel] = useState<string | null>(null);
  const model = chosenModel ?? models?.[0]?.id ?? null;
  const patientData = models?.find((candidate) => candidate.id === model)?.patientData;
  const { messages, loading, sending, error, send, stop } = useChat(openId);
  const [turns, setTurns] = useState(0);
  const conversations = useConversations(turns);
  const [prompt, setPrompt] = useState('');
  const [lastPrompt, setLastPrompt] = useState('');

  function sendPrompt(text: string): void {
    if (!model || !text || sending) {
      return;
    }
    setLastPrompt(text);
    send(model, text)
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
            <ConversationList state={conversations} openId={openId} />
          </Grid.Col>
          <Grid.Col span={{ base: 12, sm: 8, md: 9 }}>
            <Stack>
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
              {modelsError && <Alert color="red" title="The models could not be listed">{modelsError}</Alert>}
              <Stack aria-label="Conversation" role="log" aria-busy={sending || loading}>
                {loading && <Loader size="sm" aria-label="Reading the conversation" />}
                {messages.map((message, index) => (
                  <ChatMessage key={index} message={message} streaming={sending && index === messages.length - 1} />
                ))}
              </Stack>
              {error && (
                <Alert color="red" title={error.title}>
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
