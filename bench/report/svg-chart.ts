/**
 * A small SVG writer for the report's chart: one panel of horizontal bars per scenario that has bars. No library:
 * the chart is a few rectangles and labels, and the file stays readable in a diff.
 */
import type { ChartBar } from '../lib/section.ts';

export interface ChartPanel {
  readonly title: string;
  readonly bars: readonly ChartBar[];
}

const WIDTH = 720;
const LABEL_WIDTH = 130;
const VALUE_WIDTH = 110;
const BAR_HEIGHT = 22;
const BAR_GAP = 8;
const TITLE_HEIGHT = 28;
const PANEL_GAP = 24;
const COLOURS: Readonly<Record<string, string>> = { fhirgate: '#2b6cb0', Portkey: '#c05621', 'undici proxy': '#718096', 'SDK relay': '#4a5568', direct: '#a0aec0' };

function escapeXml(text: string): string {
  return text.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;');
}

function formatValue(bar: ChartBar): string {
  if (!Number.isFinite(bar.value)) return 'n/a';
  const digits = Math.abs(bar.value) >= 100 ? 0 : Math.abs(bar.value) >= 10 ? 1 : 2;
  return `${bar.value.toFixed(digits)} ${bar.unit}`;
}

/** Renders the panels as one SVG document. */
export function renderChart(panels: readonly ChartPanel[]): string {
  const parts: string[] = [];
  let y = 16;
  for (const panel of panels) {
    parts.push(`<text x="8" y="${y + 16}" font-size="14" font-weight="bold">${escapeXml(panel.title)}</text>`);
    y += TITLE_HEIGHT;
    const finite = panel.bars.map((bar) => (Number.isFinite(bar.value) ? Math.max(0, bar.value) : 0));
    const largest = Math.max(...finite, Number.MIN_VALUE);
    const scale = (WIDTH - LABEL_WIDTH - VALUE_WIDTH - 16) / largest;
    panel.bars.forEach((bar, index) => {
      const length = Math.max(1, finite[index] * scale);
      const colour = COLOURS[bar.label] ?? '#4a5568';
      parts.push(
        `<text x="${LABEL_WIDTH - 8}" y="${y + 16}" font-size="12" text-anchor="end">${escapeXml(bar.label)}</text>`,
        `<rect x="${LABEL_WIDTH}" y="${y}" width="${length.toFixed(1)}" height="${BAR_HEIGHT}" fill="${colour}"/>`,
        `<text x="${(LABEL_WIDTH + length + 6).toFixed(1)}" y="${y + 16}" font-size="12">${escapeXml(formatValue(bar))}</text>`,
      );
      y += BAR_HEIGHT + BAR_GAP;
    });
    y += PANEL_GAP;
  }
  return [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${WIDTH}" height="${y}" viewBox="0 0 ${WIDTH} ${y}" font-family="sans-serif">`,
    `<rect width="${WIDTH}" height="${y}" fill="#ffffff"/>`,
    ...parts,
    '</svg>',
    '',
  ].join('\n');
}
