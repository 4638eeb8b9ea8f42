/** The spec's device mutation, exactly as a device sends it to `/graphql`, for the tests that play a device. */
import { gql } from '@urql/core';

/** `ObservationCreate(resource: ObservationInput!)`, returning the fields the spec shows. */
export const CREATE_OBSERVATION = gql`
  mutation CreateObservation($input: ObservationInput!) {
    ObservationCreate(resource: $input) {
      id
      status
      code {
        coding {
          system
          code
        }
      }
      device {
        identifier {
          system
          value
        }
      }
    }
  }
`;

/** A heart-rate Observation input naming the device `{system, deviceId}`, as the spec's variables shape it. */
export function observationInput(deviceId: string, system: string, value?: number): Record<string, unknown> {
  return {
    status: 'final',
    code: { coding: [{ system: 'http://loinc.org', code: '8867-4' }] },
    device: { identifier: { system, value: deviceId } },
    ...(value === undefined ? {} : { valueQuantity: { value, unit: '/min' } }),
  };
}
