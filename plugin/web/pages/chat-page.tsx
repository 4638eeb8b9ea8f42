/** The clinician's chat: pick a model, write, read the reply as it streams in, and go on in the same conversation. */
import { Alert, Button, Container, Group, Select, Stack, Textarea, Title } from '@mantine/core';
import { ResourceName, useMedplum, useMedplumProfile } from '@medplum/react';
import { useState, type FormEvent, type JSX } from 'react';
import { useNavigate } from 'react-router';
import { ChatMessage } from './chat-message.tsx';
import { useChat } from './use-chat.ts';
import { useModels } from './use-models.ts';

export function ChatPage(): JSX.Element {
  const medplum = useMedplum();
  const profile = useMedplumProfile();
  const navigate = useNavigate();
  const { models, error: modelsError } = useModels();
  const [chosenModel, setChosenModel] = useState<string | null>(null);
  const model = chosenModel ?? models?.[0] ?? null;
  const { messages, sending, error, send } = useChat();
  const [prompt, setPrompt] = useState('');

  function submit(event: FormEvent): void {
    event.preventDefault();
    if (model && prompt.trim() && !sending) {
      send(model, prompt.trim()).catch(() => undefined);
      setPrompt('');
    }
  }

  function signOut(): void {
    medplum.signOut().then(() => navigate('/signin')).catch(() => navigate('/signin'));
  }

  return (
    <Container size="md" py="md">
      <Stack>
        <Group justify="space-between">
          <Title order={1}>Chat</Title>
          <Group>
            {profile && <ResourceName value={profile} />}
            <Button variant="default" onClick={signOut}>
              Sign out
            </Button>
          </Group>
        </Group>
        <Select label="Model" data={models ?? []} value={model} onChange={setChosenModel} allowDeselect={false} disabled={!models?.length} />
        {modelsError && <Alert color="red" title="The models could not be listed">{modelsError}</Alert>}
        <Stack aria-label="Conversation" role="log" aria-busy={sending}>
          {messages.map((message, index) => (
            <ChatMessage key={index} message={message} />
          ))}
        </Stack>
        {error && <Alert color="red" title="The reply did not come through">{error}</Alert>}
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
              <Button type="submit" loading={sending} disabled={!model || !prompt.trim()}>
                Send
              </Button>
            </Group>
          </Stack>
        </form>
      </Stack>
    </Container>
  );
}
