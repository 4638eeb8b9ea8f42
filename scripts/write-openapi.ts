/**
 * `npm run openapi`: writes the OpenAPI description the plugin serves to docs/openapi.json, from the same source
 * (plugin/openapi/openapi-document.ts). plugin/openapi/openapi-document.test.ts fails while the committed copy
 * differs from what this writes.
 */
import { writeFile } from 'node:fs/promises';
import { buildOpenApiDocument, renderOpenApiFile } from '../plugin/openapi/openapi-document.ts';

const file = new URL('../docs/openapi.json', import.meta.url);
await writeFile(file, renderOpenApiFile(buildOpenApiDocument()));
console.log(`wrote ${file.pathname}`);
