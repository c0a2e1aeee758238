"""The orchestration layer: the acceptance programme (`pipeline`, `programme`), what each
command collects and judges (`sections`, `demo`), a bundle judged again from its evidence
(`rederive`, `rejudge`), bundles combined (`combine`), and the sign-off and its signature
(`signoff`, `signature`). It composes the layers below it — check families, the pure decision
in `verdict/`, the report and `operate/` — and only the CLI imports it."""
