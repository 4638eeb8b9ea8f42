import express, { type Router } from 'express';
import { handleChatCompletion, type ChatServices } from './chat-completion.ts';
import { authenticateCaller } from './authenticate-caller.ts';
import { modelCatalogFor } from './project-models.ts';
import { methodNotAllowed } from '../http/method-not-allowed.ts';

/** The `/v1` chat routes: `POST /chat/completions` and `GET /models`. */
export function createChatRoutes(services: ChatServices, operatorName: string): Router {
  const router = express.Router();
  router.post('/chat/completions', async (request, response) => {
    await handleChatCompletion(services, request, response);
  });
  router.get('/models', async (request, response) => {
    const caller = await authenticateCaller(services.host, request);
    response.json({
      object: 'list',
      data: modelCatalogFor(services.models, caller.project).list().map((model) => ({ id: model.id, object: 'model', created: 0, owned_by: operatorName })),
    });
  });
  router.all('/chat/completions', methodNotAllowed(['POST']));
  router.all('/models', methodNotAllowed(['GET']));
  return router;
}
