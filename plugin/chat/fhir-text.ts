/**
 * Message text in FHIR strings, within the rules Medplum's validator applies to every write: a string is never
 * empty or only whitespace, and never longer than 1 MiB (1,048,576 UTF-16 code units). A model's reply, a user's
 * message or a tool result may be any of those, so text is written as payload items: pieces of at most
 * {@link MAX_PIECE} code units, each a `contentString`, or, for a piece that is only whitespace, a `text/plain`
 * attachment holding it; an empty text is no item at all. Read back, the pieces join into the text exactly.
 */
import type { Attachment, CommunicationPayload, Extension } from '@medplum/fhirtypes';

/** The longest piece written as one string, under Medplum's limit. */
export const MAX_PIECE = 1_000_000;

const TEXT_PLAIN = 'text/plain; charset=utf-8';

/** `text` as payload items, in order (none for ''). */
export function textPayload(text: string, extension?: readonly Extension[]): CommunicationPayload[] {
  return splitText(text).map((piece) => ({ ...(extension ? { extension: [...extension] } : {}), ...pieceContent(piece) }));
}

/** The text of payload items written by {@link textPayload}. */
export function payloadText(items: readonly CommunicationPayload[]): string {
  return items.map(pieceText).join('');
}

/**
 * `text` as repeated extensions `url`, in order (none for ''): a piece per extension, a `valueString`, or for a piece
 * that is only whitespace a `text/plain` `valueAttachment` holding it.
 */
export function textExtensions(url: string, text: string): Extension[] {
  return splitText(text).map((piece) => {
    const content = pieceContent(piece);
    return content.contentString !== undefined ? { url, valueString: content.contentString } : { url, valueAttachment: content.contentAttachment };
  });
}

/** The text of extensions written by {@link textExtensions}. */
export function extensionsText(extensions: readonly Extension[]): string {
  return extensions.map((extension) => pieceText({ contentString: extension.valueString, contentAttachment: extension.valueAttachment })).join('');
}

/** The text of one payload item written by {@link textPayload}. */
export function payloadItemText(item: CommunicationPayload): string {
  return pieceText(item);
}

/** `text` as the values of repeated string extensions (a long request body), in order. */
export function textPieces(text: string): string[] {
  return splitText(text);
}

/** Pieces of at most {@link MAX_PIECE} code units; never splits a surrogate pair. */
function splitText(text: string): string[] {
  const pieces: string[] = [];
  for (let start = 0; start < text.length; ) {
    let end = Math.min(start + MAX_PIECE, text.length);
    const last = text.charCodeAt(end - 1);
    if (end < text.length && last >= 0xd800 && last <= 0xdbff) {
      end -= 1;
    }
    pieces.push(text.slice(start, end));
    start = end;
  }
  return pieces;
}

function pieceContent(piece: string): Pick<CommunicationPayload, 'contentString' | 'contentAttachment'> {
  if (piece.trim()) {
    return { contentString: piece };
  }
  const attachment: Attachment = { contentType: TEXT_PLAIN, data: Buffer.from(piece, 'utf8').toString('base64') };
  return { contentAttachment: attachment };
}

function pieceText(item: CommunicationPayload): string {
  if (item.contentString !== undefined) {
    return item.contentString;
  }
  const data = item.contentAttachment?.data;
  return data ? Buffer.from(data, 'base64').toString('utf8') : '';
}
