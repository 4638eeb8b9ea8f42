import express, { type Router } from 'express';
import { AppError } from '../errors.ts';
import { handleChatCompletion, type ChatServices } from './chat-completion.ts';
import { authenticateCaller } from './authenticate-caller.ts';
import { modelCatalogFor } from './project-models.ts';
import { methodNotAllowed } from '../http/method-not-allowed.ts';
import { handleUsageReport } from '../governance/usage-route.ts';
import { handleGovernance } from '../governance/governance-route.ts';
import { patientDataFieldsFor } from '../governance/patient-data-egress.ts';
import type { ModelCatalog } from '../llm/model-registry.ts';
import type { Project } from '@medplum/fhirtypes';

/** The `/v1` chat routes: `POST /chat/completions`, `GET /models`, `GET /models/{id}`, `GET /usage` and `GET /governance`. */
export function createChatRoutes(services: ChatServices, operatorName: string): Router {
  const router = express.Router();
  router.post('/chat/completions', async (request, response) => {
    await handleChatCompletion(services, request, response);
  });
  // Each model also says what a turn about a patient does on it in the caller's project (governance/patient-data-settings.ts).
  const modelObjects = (project: Project, catalog: ModelCatalog): ((id: string) => Record<string, unknown>) => {
    const fhirgateFields = patientDataFieldsFor(services.patientData, project, catalog);
    return (id) => ({ id, object: 'model', created: 0, owned_by: operatorName, fhirgate: fhirgateFields(id) });
  };
  router.get('/models', async (request, response) => {
    const caller = await authenticateCaller(services.host, request);
    const { governance } = services;
    const catalog = modelCatalogFor(services.models, caller.project);
    // Only the models the caller may use (governance/model-access.ts).
    const models = await governance.modelAccess.listFor(caller, governance.settings.of(caller.project), catalog.list());
    const modelObject = modelObjects(caller.project, catalog);
    response.json({ object: 'list', data: models.map((model) => modelObject(model.id)) });
  });
  // Ids hold a slash (`provider/model`): clients send it as it is or encoded (%2F), and either reads the same model.
  router.get('/models/*segments', async (request, response) => {
    const caller = await authenticateCaller(services.host, request);
    const segments = request.params.segments;
    const id = Array.isArray(segments) ? segments.join('/') : String(segments);
    const catalog = modelCatalogFor(services.models, caller.project);
    if (!catalog.list().some((model) => model.id === id)) {
      const echoed = id.length > 200 ? `${id.slice(0, 200)}…` : id;
      throw new AppError('model_not_found', `The model '${echoed}' does not exist or is not offered to this project; GET /v1/models lists the models you can use.`, {
        details: { param: 'model' },
      });
    }
    // A model of the project the caller was not granted: 403, as a chat request for it would be.
    await services.governance.modelAccess.requireListed(caller, services.governance.settings.of(caller.project), id);
    response.json(modelObjects(caller.project, catalog)(id));
  });
  router.get('/usage', async (request, response) => {
    await handleUsageReport(services, request, response);
  });
  router.get('/governance', async (request, response) => {
    await handleGovernance(services, request, response);
  });
  router.all('/chat/completions', methodNotAllowed(['POST']));
  router.all('/models', methodNotAllowed(['GET']));
  router.all('/models/*segments', methodNotAllowed(['GET']));
  router.all('/usage', methodNotAllowed(['GET']));
  router.all('/governance', methodNotAllowed(['GET']));
  return router;
}
