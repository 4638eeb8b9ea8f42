/**
 * An AccessPolicy with each rule's `criteria` parsed once. `@medplum/core`'s `satisfiedAccessPolicy` parses the
 * criteria URL again for every resource it checks (a third of the policy's cost in a narrowed search); this is
 * the same decision, rule by rule in the same order, with the parse done when the policy is first used.
 *
 * Decisions about stored versions are remembered: a stored version (type, id, versionId) never changes content,
 * and a compiled policy never changes, so the answer for the pair is fixed. A conversation's history, read under
 * the caller's policy on every turn, then costs one FHIRPath evaluation per message once, not once per turn.
 *
 * For a search, the policy is also given as the alternatives a store can evaluate itself (`searchAlternatives`):
 * the same rules, in the same order, as filters.
 */
import {
  AccessPolicyInteraction,
  matchesSearchRequest,
  parseSearchRequest,
  projectAdminResourceTypes,
  readInteractions,
  type SearchRequest,
} from '@medplum/core';
import type { AccessPolicy, AccessPolicyResource, Resource } from '@medplum/fhirtypes';
import type { PolicyAlternative } from './store/search-plan.ts';

/** Decides what one policy allows, as `satisfiedAccessPolicy` does. */
export interface CompiledAccessPolicy {
  /** The first rule that allows the interaction on the resource (Medplum's answer), or undefined. */
  satisfiedBy(resource: Resource, interaction: AccessPolicyInteraction): AccessPolicyResource | undefined;
  /**
   * The same answer for a resource exactly as the store holds it (read or searched, with its `meta.versionId`),
   * remembered per stored version. Never for content about to be written: it may carry an old versionId.
   */
  satisfiedByStored(resource: Resource, interaction: AccessPolicyInteraction): AccessPolicyResource | undefined;
  /**
   * What the policy lets a search of `resourceType` return, as alternatives (some rule's criteria and compartment):
   * a resource is allowed exactly when it satisfies one. Undefined when the policy does not narrow the search (a
   * rule for the type has neither criteria nor compartment); empty when no rule allows searching the type.
   */
  searchAlternatives(resourceType: string): readonly PolicyAlternative[] | undefined;
}

interface CompiledRule {
  readonly rule: AccessPolicyResource;
  readonly criteria: SearchRequest | undefined;
}

// Keyed by the policy object: a caller's repository and the repositories of its transactions share one.
const compiledPolicies = new WeakMap<AccessPolicy, CompiledAccessPolicy>();
// And by content: a caller resolved again (its cache entry expired) gets an equal policy object, and keeps the
// decisions already made. Bounded; the oldest is dropped first.
const compiledByContent = new Map<string, CompiledAccessPolicy>();
const MAX_POLICIES_BY_CONTENT = 256;

// Decisions about stored versions, for all policies together, so memory stays bounded however many callers there
// are: about 100 bytes an entry. Keyed by policy serial, interaction and version; the value is the rule's index, or -1.
const storedDecisions = new Map<string, number>();
export const MAX_STORED_DECISIONS = 50_000;
let nextSerial = 0;

/** The compiled form of a policy, made on first use and kept as long as the policy object lives. */
export function compileAccessPolicy(policy: AccessPolicy): CompiledAccessPolicy {
  let compiled = compiledPolicies.get(policy);
  if (!compiled) {
    const content = JSON.stringify(policy);
    compiled = compiledByContent.get(content);
    if (!compiled) {
      compiled = buildCompiledPolicy(policy);
      remember(compiledByContent, content, compiled, MAX_POLICIES_BY_CONTENT);
    }
    compiledPolicies.set(policy, compiled);
  }
  return compiled;
}

function remember<V>(map: Map<string, V>, key: string, value: V, max: number): void {
  if (map.size >= max) {
    map.delete(map.keys().next().value as string);
  }
  map.set(key, value);
}

function buildCompiledPolicy(policy: AccessPolicy): CompiledAccessPolicy {
  const serial = nextSerial++;
  // Parsed lazily, so a rule whose criteria no request reaches costs nothing (device policies are per request).
  let rules: CompiledRule[] | undefined;
  const compiledRules = (): CompiledRule[] => {
    rules ??= (policy.resource ?? []).map((rule) => ({
      rule,
      criteria: rule.criteria ? parseSearchRequest(rule.criteria) : undefined,
    }));
    return rules;
  };
  const firstMatch = (resource: Resource, interaction: AccessPolicyInteraction): number =>
    compiledRules().findIndex((compiled) => matchesRule(resource, interaction, compiled));
  const storedMatch = (resource: Resource, interaction: AccessPolicyInteraction): number => {
    const versionId = resource.meta?.versionId;
    if (!resource.id || !versionId) {
      return firstMatch(resource, interaction);
    }
    const key = `${serial} ${interaction} ${resource.resourceType}/${resource.id}/${versionId}`;
    let index = storedDecisions.get(key);
    if (index === undefined) {
      index = firstMatch(resource, interaction);
      remember(storedDecisions, key, index, MAX_STORED_DECISIONS);
    }
    return index;
  };
  const alternativesByType = new Map<string, readonly PolicyAlternative[] | undefined>();
  return {
    satisfiedBy: (resource, interaction) => compiledRules()[firstMatch(resource, interaction)]?.rule,
    satisfiedByStored: (resource, interaction) => compiledRules()[storedMatch(resource, interaction)]?.rule,
    searchAlternatives: (resourceType) => {
      if (!alternativesByType.has(resourceType)) {
        alternativesByType.set(resourceType, searchAlternativesOf(compiledRules(), resourceType));
      }
      return alternativesByType.get(resourceType);
    },
  };
}

/** The rules `matchesRule` would try for a search of the type, as alternatives a store can evaluate. */
function searchAlternativesOf(rules: readonly CompiledRule[], resourceType: string): readonly PolicyAlternative[] | undefined {
  const applicable = rules.filter((compiled) => shallowMatchesRule(compiled.rule, resourceType, AccessPolicyInteraction.SEARCH));
  if (resourceType === 'Binary') {
    // Criteria and compartments do not apply to Binary (see matchesRule): any rule for it allows every one.
    return applicable.length > 0 ? undefined : [];
  }
  if (applicable.some((compiled) => !compiled.criteria && !compiled.rule.compartment)) {
    return undefined;
  }
  // Criteria of another type match no resource of this one (matchesSearchRequest compares the types first).
  return applicable
    .filter((compiled) => !compiled.criteria || compiled.criteria.resourceType === resourceType)
    .map((compiled) => ({
      filters: compiled.criteria?.filters ?? [],
      ...(compiled.rule.compartment ? { compartment: { reference: compiled.rule.compartment.reference } } : {}),
    }));
}

/** Medplum's `matchesAccessPolicyResourcePolicy` with the criteria already parsed. */
function matchesRule(resource: Resource, interaction: AccessPolicyInteraction, compiled: CompiledRule): boolean {
  const { rule, criteria } = compiled;
  const resourceType = resource.resourceType;
  if (!shallowMatchesRule(rule, resourceType, interaction)) {
    return false;
  }
  // Binary has no search parameters, so it cannot be restricted by compartment or criteria.
  if (resourceType === 'Binary') {
    return true;
  }
  if (rule.compartment && !resource.meta?.compartment?.some((entry) => entry.reference === rule.compartment?.reference)) {
    return false;
  }
  return !criteria || matchesSearchRequest(resource, criteria);
}

/** Medplum's `shallowMatchesResourcePolicy`. */
function shallowMatchesRule(rule: AccessPolicyResource, resourceType: string, interaction: AccessPolicyInteraction): boolean {
  if (rule.resourceType !== resourceType && (rule.resourceType !== '*' || projectAdminResourceTypes.includes(resourceType))) {
    return false;
  }
  if (!rule.interaction) {
    return !rule.readonly || readInteractions.includes(interaction);
  }
  return rule.interaction.includes(interaction);
}
