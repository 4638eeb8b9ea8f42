/**
 * `GET /fhir/R4/metadata`: the host's CapabilityStatement, without authentication as Medplum serves its own
 * (fhir/metadata.ts), for FHIR clients that read it before anything else. It states what this host does: FHIR
 * R4.0.1 in JSON, every resource type with the interactions Medplum's `FhirRouter` runs over the store, batch and
 * transaction bundles, and OAuth with its token URL. It lists no search parameters; a search the host cannot run is
 * answered with an OperationOutcome naming it.
 */
import { getResourceTypes } from '@medplum/core';
import type { CapabilityStatement, CapabilityStatementRestResource } from '@medplum/fhirtypes';
import type { RequestHandler } from 'express';
import { FHIRGATE_VERSION } from '../../version.ts';

const TYPE_INTERACTIONS: CapabilityStatementRestResource['interaction'] = [
  { code: 'read' },
  { code: 'vread' },
  { code: 'update' },
  { code: 'patch' },
  { code: 'delete' },
  { code: 'history-instance' },
  { code: 'create' },
  { code: 'search-type' },
];

/** What the statement says about the host. */
export interface CapabilityStatementOptions {
  /** The host's public base URL, with a trailing slash. */
  readonly baseUrl: string;
  /** Whether browser applications of other origins may call it (`FHIRGATE_ALLOWED_ORIGINS`). */
  readonly cors: boolean;
}

/** The host's CapabilityStatement (the FHIR definitions must be loaded). */
export function buildCapabilityStatement(options: CapabilityStatementOptions): CapabilityStatement {
  const fhirBaseUrl = `${options.baseUrl}fhir/R4/`;
  return {
    resourceType: 'CapabilityStatement',
    url: `${fhirBaseUrl}metadata`,
    name: 'FhirgateStandaloneHost',
    title: 'fhirgate standalone host',
    status: 'active',
    date: new Date().toISOString(),
    publisher: 'fhirgate',
    kind: 'instance',
    software: { name: 'fhirgate standalone host', version: FHIRGATE_VERSION },
    implementation: { description: 'fhirgate standalone host: a Medplum-compatible FHIR server with fhirgate mounted', url: fhirBaseUrl },
    fhirVersion: '4.0.1',
    format: ['json'],
    patchFormat: ['application/json-patch+json'],
    rest: [
      {
        mode: 'server',
        security: {
          cors: options.cors,
          service: [{ coding: [{ system: 'http://terminology.hl7.org/CodeSystem/restful-security-service', code: 'OAuth' }] }],
          extension: [
            {
              url: 'http://fhir-registry.smarthealthit.org/StructureDefinition/oauth-uris',
              extension: [{ url: 'token', valueUri: `${options.baseUrl}oauth2/token` }],
            },
          ],
        },
        resource: getResourceTypes()
          .filter((type) => type !== 'Binary')
          .map((type) => ({ type, interaction: TYPE_INTERACTIONS, versioning: 'versioned', readHistory: true })),
        interaction: [{ code: 'transaction' }, { code: 'batch' }],
      },
    ],
  };
}

/** The route's handler: the statement is built at its first request and kept. */
export function createCapabilityStatementRoute(options: CapabilityStatementOptions): RequestHandler {
  let statement: CapabilityStatement | undefined;
  return (_request, response) => {
    statement ??= buildCapabilityStatement(options);
    response.type('application/fhir+json').json(statement);
  };
}
