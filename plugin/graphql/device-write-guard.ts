/**
 * What a device may write through `/graphql`: only its own Observations, about its assigned patient, itself or no
 * one. Every `ObservationCreate` and `ObservationUpdate` must name the device of the token in `device.identifier`
 * (the configured system, the token's `sub`) and keep to the rules of `device-observation-rules.ts` (subject,
 * references, `meta`); the guard then links the Observation to the Device resource (`device.reference`). Any
 * other mutation is forbidden; queries pass, since the device's AccessPolicy bounds what it reads.
 *
 * Each checked value is hoisted into a fresh variable (`$fhirgate_res_0: ObservationCreate!`) whose value is the
 * checked, completed copy, so inline literals and variables end up the same way and nothing the guard did not
 * see can reach Medplum. Runs on the output of `translateDocument`.
 */
import { Kind, print, valueFromASTUntyped, visit } from 'graphql';
import type { ASTNode, ArgumentNode, DocumentNode, FragmentDefinitionNode, OperationDefinitionNode, ValueNode, VariableDefinitionNode } from 'graphql';
import { AppError } from '../errors.ts';
import { isJsonObject, variableValue, withVariable, type MedplumGraphqlRequest } from './graphql-request.ts';
import { collectRootFields, fragmentsOf, mutationOperations, parseResourceWrite } from './mutation-fields.ts';
import { checkWhatItIsAbout } from './device-observation-rules.ts';

/** The device behind a device token. */
export interface DeviceCaller {
  /** The token's `sub`: the device id, the value of the Device's identifier. */
  readonly deviceId: string;
  /** The token's `entity_id`: the id of the FHIR Device resource. */
  readonly deviceResourceId: string;
  /** The configured identifier system of devices. */
  readonly identifierSystem: string;
  /**
   * `Patient/<id>` of the patient the device is assigned to (its `Device.patient`, checked to be a Patient of the
   * project), or undefined: then it writes about no patient.
   */
  readonly assignedPatient?: string;
}

const HOISTED_PREFIX = 'fhirgate_res_';

/** Refuses writes a device may not make and returns the request with each Observation checked and linked. */
export function guardDeviceWrites(request: MedplumGraphqlRequest, device: DeviceCaller): MedplumGraphqlRequest {
  const plan = planFor(request.document);
  if (plan.hoists.length === 0) {
    return request;
  }
  let variables = request.variables;
  for (const { operation, argument, fieldName, name } of plan.hoists) {
    variables = withVariable(variables, name, checkObservation(resolveValue(argument.value, operation, variables), device, fieldName));
  }
  const kept = Object.fromEntries(Object.entries(variables).filter(([name]) => plan.definedVariables.has(name) || !plan.replacedVariables.has(name)));
  return { ...request, query: plan.query, variables: kept, document: plan.document };
}

/** One write a device makes: its `res` argument, hoisted into the variable `name`. */
interface HoistedWrite {
  readonly operation: OperationDefinitionNode;
  readonly argument: ArgumentNode;
  readonly fieldName: string;
  readonly name: string;
}

/**
 * What the guard does to a document, whatever the values and whichever the device: the writes to check, and the
 * document with each one's value hoisted into a variable. A document's plan is kept as long as the document
 * (`translate-document.ts` hands out the same document for the same text), so each request only checks values.
 */
interface DeviceWritePlan {
  readonly hoists: readonly HoistedWrite[];
  readonly document: DocumentNode;
  readonly query: string;
  /** The variables the hoisted values came from. */
  readonly replacedVariables: ReadonlySet<string>;
  /** The variables the guarded document still defines. */
  readonly definedVariables: ReadonlySet<string>;
}

const plans = new WeakMap<DocumentNode, DeviceWritePlan>();

function planFor(document: DocumentNode): DeviceWritePlan {
  let plan = plans.get(document);
  if (!plan) {
    // A document with a write a device may not make throws here, every time: only allowed shapes are kept.
    plan = planDeviceWrites(document);
    plans.set(document, plan);
  }
  return plan;
}

function planDeviceWrites(source: DocumentNode): DeviceWritePlan {
  const fragments = fragmentsOf(source);
  const takenNames = variableNamesIn(source);
  const hoists: HoistedWrite[] = [];
  const hoisted = new Map<ArgumentNode, string>();
  const addedDefinitions = new Map<OperationDefinitionNode, VariableDefinitionNode[]>();
  const replacedVariables = new Set<string>();

  for (const operation of mutationOperations(source)) {
    for (const { field, throughFragmentSpread } of collectRootFields(operation, fragments)) {
      const fieldName = field.name.value;
      if (fieldName === '__typename') {
        continue;
      }
      if (throughFragmentSpread) {
        throw forbidden('A device must write its mutations in the operation itself, not in a fragment.');
      }
      const write = parseResourceWrite(fieldName);
      if (!write || write.resourceType !== 'Observation') {
        throw forbidden(`A device may only create or update Observations; ${fieldName.slice(0, 64)} is not allowed.`);
      }
      const argument = field.arguments?.find((candidate) => candidate.name.value === 'res');
      if (!argument) {
        throw forbidden(`${fieldName}: the Observation must name this device in device.identifier.`);
      }
      const name = freshName(takenNames);
      hoists.push({ operation, argument, fieldName, name });
      hoisted.set(argument, name);
      addedDefinitions.set(operation, [...(addedDefinitions.get(operation) ?? []), hoistedDefinition(name, `${write.resourceType}Create`)]);
      variableNamesIn(argument.value).forEach((name) => replacedVariables.add(name));
    }
  }
  if (hoists.length === 0) {
    return { hoists, document: source, query: '', replacedVariables, definedVariables: new Set() };
  }

  const edited = visit(source, {
    OperationDefinition(node) {
      const added = addedDefinitions.get(node);
      return added ? { ...node, variableDefinitions: [...(node.variableDefinitions ?? []), ...added] } : undefined;
    },
    Argument(node) {
      const name = hoisted.get(node);
      return name ? { ...node, value: { kind: Kind.VARIABLE, name: { kind: Kind.NAME, value: name } } } : undefined;
    },
  });
  const document = dropUnusedDefinitions(edited, replacedVariables);
  return { hoists, document, query: print(document), replacedVariables, definedVariables: definedVariablesOf(document) };
}

/** The value of a `res` argument as the engine would see it, as a plain deep copy. */
function resolveValue(value: ValueNode, operation: OperationDefinitionNode, variables: Readonly<Record<string, unknown>>): unknown {
  let resolved: unknown;
  if (value.kind === Kind.VARIABLE) {
    const name = value.name.value;
    resolved = variableValue(variables, name);
    const defaultValue = operation.variableDefinitions?.find((definition) => definition.variable.name.value === name)?.defaultValue;
    if (resolved === undefined && defaultValue) {
      resolved = valueFromASTUntyped(defaultValue);
    }
  } else {
    // A null-prototype copy, so a nested `$__proto__` reads the variable and not Object.prototype
    resolved = valueFromASTUntyped(value, Object.assign(Object.create(null) as Record<string, unknown>, variables));
  }
  return resolved === undefined ? undefined : structuredClone(resolved);
}

function checkObservation(value: unknown, device: DeviceCaller, fieldName: string): Record<string, unknown> {
  const reference = isJsonObject(value) ? value.device : undefined;
  const identifier = isJsonObject(reference) ? reference.identifier : undefined;
  if (!isJsonObject(value) || !isJsonObject(reference) || !isJsonObject(identifier)) {
    throw forbidden(`${fieldName}: the Observation must name this device in device.identifier (system and value).`);
  }
  if (identifier.system !== device.identifierSystem) {
    throw forbidden(`${fieldName}: device.identifier.system must be this server's device identifier system (${device.identifierSystem}).`);
  }
  if (identifier.value !== device.deviceId) {
    throw forbidden(`${fieldName}: device.identifier.value must be the device id of the access token.`);
  }
  checkWhatItIsAbout(value, device, fieldName);
  return { resourceType: 'Observation', ...value, device: { ...reference, reference: `Device/${device.deviceResourceId}` } };
}

function hoistedDefinition(name: string, typeName: string): VariableDefinitionNode {
  return {
    kind: Kind.VARIABLE_DEFINITION,
    variable: { kind: Kind.VARIABLE, name: { kind: Kind.NAME, value: name } },
    type: { kind: Kind.NON_NULL_TYPE, type: { kind: Kind.NAMED_TYPE, name: { kind: Kind.NAME, value: typeName } } },
  };
}

function freshName(taken: Set<string>): string {
  let index = 0;
  while (taken.has(`${HOISTED_PREFIX}${index}`)) {
    index += 1;
  }
  const name = `${HOISTED_PREFIX}${index}`;
  taken.add(name);
  return name;
}

function variableNamesIn(node: ASTNode): Set<string> {
  const names = new Set<string>();
  visit(node, {
    Variable(variable) {
      names.add(variable.name.value);
    },
  });
  return names;
}

/** Removes definitions of variables the hoisting left unused: GraphQL rejects an operation with an unused variable. */
function dropUnusedDefinitions(document: DocumentNode, candidates: ReadonlySet<string>): DocumentNode {
  if (candidates.size === 0) {
    return document;
  }
  const fragments = fragmentsOf(document);
  return {
    ...document,
    definitions: document.definitions.map((definition) => {
      if (definition.kind !== Kind.OPERATION_DEFINITION || !definition.variableDefinitions) {
        return definition;
      }
      const used = variablesUsedBy(definition, fragments);
      const kept = definition.variableDefinitions.filter((variable) => used.has(variable.variable.name.value) || !candidates.has(variable.variable.name.value));
      return kept.length === definition.variableDefinitions.length ? definition : { ...definition, variableDefinitions: kept };
    }),
  };
}

/** The variables a document's operations define: only their values, and those of untouched variables, go to Medplum. */
function definedVariablesOf(document: DocumentNode): Set<string> {
  const defined = new Set<string>();
  for (const definition of document.definitions) {
    if (definition.kind === Kind.OPERATION_DEFINITION) {
      definition.variableDefinitions?.forEach((variable) => defined.add(variable.variable.name.value));
    }
  }
  return defined;
}

function variablesUsedBy(operation: OperationDefinitionNode, fragments: ReadonlyMap<string, FragmentDefinitionNode>): Set<string> {
  const used = new Set<string>();
  const spread = new Set<string>();
  const pending = [operation.selectionSet];
  for (let selectionSet = pending.pop(); selectionSet; selectionSet = pending.pop()) {
    visit(selectionSet, {
      Variable(node) {
        used.add(node.name.value);
      },
      FragmentSpread(node) {
        const fragment = fragments.get(node.name.value);
        if (fragment && !spread.has(node.name.value)) {
          spread.add(node.name.value);
          pending.push(fragment.selectionSet);
        }
      },
    });
  }
  return used;
}

function forbidden(message: string): AppError {
  return new AppError('forbidden', message);
}
