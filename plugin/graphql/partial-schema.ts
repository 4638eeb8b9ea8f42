/**
 * Documents answered from the partial engine's schema (`HostFhirEngine.createPartialRouter`): Medplum's schema
 * built by Medplum's own code over a definitions index that lists only the resource types devices write. For those
 * types it holds what Medplum's whole schema holds (the root fields, the object types and their fields, every
 * input type and enum, the resolvers), built from the same definitions by the same code; it lacks the other
 * resource types, the fields that lead to them (reverse lookups from them) and the members of `ResourceList`.
 *
 * A document is answered from it when its pruned schema (`pruned-schema.ts`) can be built from the partial schema
 * and the document validates against that pruned schema (graphql's own rules, as Medplum's handler validates).
 * Then it validates against Medplum's whole schema too, and runs the same: every field it selects, with its
 * arguments, type and resolver, every input type and enum, is the same as there, and validation passes on a schema
 * holding a subset of the same types and fields only if it passes on the whole. Some resolvers would not run the
 * same in the partial copy, so a document that reaches them is left to Medplum's handler and its whole schema:
 *   - a union (`reference { resource }`): Medplum resolves it to whatever resource type the reference names, which
 *     the partial index may not hold;
 *   - a `fhirpath` argument: Medplum evaluates it with the index's element definitions;
 *   - a read by id (`Observation(id: …)`, the query root's fields other than `…List` and `…Connection`): its
 *     resolver recognises the repository's errors by the class of its own copy of `@medplum/core`, which the host's
 *     repository does not throw, so a missing or forbidden resource would come out a bad request.
 * Anything else that does not fit (a field or type the partial schema lacks, a syntax or validation error) is left
 * to Medplum's handler too, which answers it in its own words.
 */
import { parse, validate, visit, type DocumentNode, type GraphQLSchema } from 'graphql';
import { collectSelections } from './document-selections.ts';
import { nameOf, requireDefined, type ForeignSchema } from './foreign-schema.ts';
import { buildPrunedSchema } from './pruned-schema.ts';
import { sharedTypesOf } from './shared-schema-types.ts';

/** A document answered from the partial schema: parsed, and its pruned schema. */
export interface PartialSchemaDocument {
  readonly document: DocumentNode;
  readonly schema: GraphQLSchema;
}

/** The document and its pruned schema, or the reason it is left to Medplum's handler. */
export function pruneFromPartialSchema(partial: ForeignSchema, query: string): PartialSchemaDocument | { readonly leftToMedplum: string } {
  let document: DocumentNode;
  try {
    document = parse(query);
  } catch {
    return { leftToMedplum: 'a syntax error' };
  }
  if (givesFhirpathArgument(document)) {
    return { leftToMedplum: 'a fhirpath argument' };
  }
  let schema: GraphQLSchema;
  try {
    const byId = readsById(partial, document);
    if (byId) {
      return { leftToMedplum: `a read by id (${byId})` };
    }
    schema = buildPrunedSchema(partial, document, sharedTypesOf(partial), { refuseUnions: true });
  } catch (error) {
    return { leftToMedplum: error instanceof Error ? error.message : String(error) };
  }
  const errors = validate(schema, document);
  return errors.length === 0 ? { document, schema } : { leftToMedplum: 'a validation error' };
}

// Medplum's query root: `<type>(id)` reads by id, `<type>List` and `<type>Connection` search.
const SEARCH_ROOT_FIELD = /(List|Connection)$/;

/** The first root field of the document that reads by id; throws on a field the partial schema lacks. */
function readsById(partial: ForeignSchema, document: DocumentNode): string | undefined {
  const queryRoot = requireDefined(partial.getQueryType(), 'the query root type');
  const selected = collectSelections(partial, document).types.get(nameOf(queryRoot))?.fields ?? new Set<string>();
  return [...selected].find((fieldName) => !SEARCH_ROOT_FIELD.test(fieldName));
}

function givesFhirpathArgument(document: DocumentNode): boolean {
  let found = false;
  visit(document, {
    Argument(node) {
      if (node.name.value === 'fhirpath') {
        found = true;
      }
    },
  });
  return found;
}

/** True for an answer of `pruneFromPartialSchema` that can be run. */
export function isPartialSchemaDocument(value: PartialSchemaDocument | { readonly leftToMedplum: string }): value is PartialSchemaDocument {
  return 'schema' in value;
}
