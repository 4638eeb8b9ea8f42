import { findSmokeProblems } from './smoke-check.ts';
import type { ScenarioSection } from './section.ts';

function section(title: string, rows: (string | number)[][], columns = ['contender', 'p50 ms', 'errors']): ScenarioSection {
  return { title, method: '', table: { columns, rows }, targets: [], notes: [] };
}

describe('findSmokeProblems', () => {
  test('a run where every requested scenario answered without an error passes', () => {
    const sections = [
      section('1. Added latency', [
        ['direct', 0.5, 0],
        ['fhirgate', 9.1, 0],
      ]),
      section('6. Devices', [['POST /graphql', 900]], ['endpoint', 'requests/s']),
    ];
    expect(findSmokeProblems(['1', '6'], sections, [])).toEqual([]);
  });

  test('a row with errors fails the run, naming the scenario and the contender', () => {
    const sections = [
      section('2. Saturated throughput', [
        ['Portkey', 700, 0],
        ['fhirgate', 160, 3],
      ]),
    ];
    expect(findSmokeProblems(['2'], sections, [])).toEqual(['2. Saturated throughput: fhirgate had 3 error(s)']);
  });

  test('a scenario that failed or wrote nothing fails the run', () => {
    const missing = [{ id: '3', title: 'Scenario 3', reason: 'failed: fhirgate did not start' }];
    expect(findSmokeProblems(['3', '4'], [], missing)).toEqual(['Scenario 3: failed: fhirgate did not start', 'scenario 4: no section was written']);
  });

  test('an external scenario reported missing is named once', () => {
    const missing = [{ id: '5', title: '5. History', reason: 'exited with code 1' }];
    expect(findSmokeProblems(['5'], [], missing)).toEqual(['5. History: exited with code 1']);
  });
});
