/**
 * What profiling the devices scenario found and what changed, with the numbers before and after; measured once
 * (2026-11-22, this machine: 2 cores, taskset, the full plan) and recorded here so the report keeps them next to
 * the current run's numbers.
 */
export const OPTIMISATION_NOTES: readonly string[] = [
  'Profile before (host under `node --cpu-prof`, the whole run): 44% of the host\'s CPU in graphql-js\'s KnownTypeNamesRule inside ' +
    "Medplum's $graphql handler (it lists all ~30,000 type names of Medplum's schema on every validation), for fhirgate's /graphql and Medplum's " +
    'endpoint alike; 19% in SQLite COMMIT (the store writes with synchronous=FULL: one fsync per write); 7% in token crypto. In-process, ' +
    "Medplum's handler took 8.6 ms per device mutation, 7.4 ms of it in that one rule.",
  "Fix: /graphql's fast path (plugin/graphql/fast-graphql-path.ts, docs/devices.md): a document's first request goes to Medplum's " +
    "handler, which validates it; a document that validated is then kept (LRU, 256) with a schema pruned to what it selects, built with " +
    "fhirgate's graphql-js and Medplum's own resolvers, and runs there without validation; anything it is not sure about (invalid " +
    "documents, introspection) still goes to Medplum's handler.",
  'Before → after, same conditions (full plan, host profiled): fhirgate /graphql 86 → 233 ObservationCreate/s; Medplum /fhir/R4/$graphql ' +
    '88 → 53 (its code is unchanged: other benchmarks shared the 2 cores during the later runs, and the store is larger by then); ratio ' +
    '0.98 × → 4.4 ×. Full plan after, not profiled: 251 vs 56 (4.5 ×). Smoke plan before: 103 vs 108 (0.96 ×). Engines alone, ' +
    "in-process: fhirgate's pipeline 8.6 → 0.32–0.47 ms per mutation; Medplum's handler 8–11 ms (17 × to 35 ×).",
  "Profile after: KnownTypeNamesRule is gone from fhirgate's requests (it remains on Medplum's endpoint); the top of the host's profile is " +
    "SQLite COMMIT (30%), which now bounds fhirgate's /graphql at roughly 250–300 durable writes per second on this disk, whatever GraphQL " +
    'costs. With Medplum at ~9 ms + a commit per request, ≥ 10 × end to end would need fhirgate under ~1.3 ms per request including its ' +
    "durable write: the remaining lever is the store's commit policy (group commit, or synchronous=NORMAL under WAL), not /graphql. The " +
    'engines-alone row shows the GraphQL part alone above the target.',
  'Memory: the first version of the fast path mirrored all of Medplum\'s schema (~30,900 types) and added ~520 MB to the host ' +
    '(VmRSS after start-up: 788–812 MB without a fast path, 1,307 MB with the mirror). Pruned per document instead: 794–808 MB after ' +
    'start-up, 850–876 MB after 2,000 device mutations (the host without a fast path: 965–971 MB after the same 2,000, which its handler validates ' +
    'one by one). A pruned schema is 30–60 KB of heap; 256 kept documents at most ~16 MB. Engines alone: 27 × Medplum\'s handler ' +
    '(0.30 vs 8.1 ms per mutation); end to end 614 vs 107 ObservationCreate/s (5.7 ×, full plan, 2026-11-22; still bound by the store\'s commit, as above).',
  'Second round (2026-11-23). A profile of the host under /graphql load alone (8 connections, 10 s) put 24 % of i' +
    'ts CPU in translating the document and planning the device guard (graphql-js visit and print, on every request' +
    ', for the same document text) and 18 % in GC; token verification (HS256) and a Device search per request were ' +
    'smaller. Fixes: what depends on the document\'s text alone (parsing, the limits, the translation\'s edits, whi' +
    'ch writes are hoisted, the printed query) is planned once per document and kept (plugin/graphql/translate-docu' +
    'ment.ts `DocumentTranslator`, LRU 256; device-write-guard.ts keeps the guard\'s plan as long as the document),' +
    ' and each request only completes and checks its own variables against its own device; a device token\'s verifi' +
    'ed claims are kept until it expires (at most 60 s); the Device is read by id. Host CPU per ObservationCreate 1' +
    '.95 → 1.0–1.4 ms and /graphql 475 → 660–920 requests/s (two before/after pairs, same load script, interleaved)' +
    '; engines alone 0.56 → 0.18 ms per mutation; end to end 8.26 × → 12.74 × Medplum\'s handler (full runs of 2026' +
    '-11-23, before and after).',
];
