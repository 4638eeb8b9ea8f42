/**
 * The row of filters above a review list: the fields, then **Search** (the list's search runs on the server when the
 * reviewer asks, not at each keystroke) and **Clear**.
 */
import { Button, Group } from '@mantine/core';
import type { JSX, ReactNode } from 'react';

export function FilterForm(props: { readonly label: string; readonly children: ReactNode; readonly onSearch: () => void; readonly onClear: () => void }): JSX.Element {
  return (
    <form
      aria-label={props.label}
      onSubmit={(event) => {
        event.preventDefault();
        props.onSearch();
      }}
    >
      <Group align="end" gap="sm" mb="md" wrap="wrap">
        {props.children}
        <Button type="submit">Search</Button>
        <Button variant="default" onClick={props.onClear}>
          Clear
        </Button>
      </Group>
    </form>
  );
}
