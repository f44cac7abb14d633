"""``dyno respond``: Alertmanager's webhook in, one job-wide capture per alert out.

One concern per module: :mod:`.alerts` (the payload), :mod:`.webhook` (HTTP), :mod:`.jobs` (an alert's
job to its hosts and ranks), :mod:`.capture` (the same steps traced on every rank, collected),
:mod:`.analysis` (the slowest rank, by HolisticTraceAnalysis), :mod:`.store` (the record), and
:mod:`.responder` (the flow from one to the next, on a worker thread).
"""

ENV = "DYNO_INCIDENTS"  # the incidents folder, for `dyno respond --collect` and `dyno incidents --from`
