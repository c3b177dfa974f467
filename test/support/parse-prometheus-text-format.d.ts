// Types of the parts of `parse-prometheus-text-format` the metrics test uses (the package ships none).
declare module 'parse-prometheus-text-format' {
  export interface ParsedSample {
    readonly value?: string;
    readonly labels?: Record<string, string>;
    readonly buckets?: Record<string, string>;
    readonly count?: string;
    readonly sum?: string;
  }
  export interface ParsedFamily {
    readonly name: string;
    readonly help: string;
    readonly type: 'COUNTER' | 'GAUGE' | 'HISTOGRAM' | 'SUMMARY' | 'UNTYPED';
    readonly metrics: readonly ParsedSample[];
  }
  export default function parsePrometheusTextFormat(text: string): ParsedFamily[];
}
