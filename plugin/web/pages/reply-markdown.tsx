/**
 * A reply's text rendered as Markdown (headings, lists, emphasis, code, links), sanitised: `react-markdown` builds
 * React elements from the Markdown and never renders raw HTML (it is shown as text), and links open only on the
 * usual safe protocols (its default `urlTransform`), in a new tab.
 */
import { Typography } from '@mantine/core';
import type { JSX } from 'react';
import Markdown from 'react-markdown';

export function ReplyMarkdown({ text }: { readonly text: string }): JSX.Element {
  return (
    <Typography>
      <Markdown skipHtml components={{ a: ({ node: _node, ...props }) => <a {...props} target="_blank" rel="noopener noreferrer" /> }}>
        {text}
      </Markdown>
    </Typography>
  );
}
