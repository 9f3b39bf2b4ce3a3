"""The shared data model every layer speaks: ``schemas`` (the fixed Arrow schema of each kind
of record), ``source`` (one rank's data as the scanner found it), ``rankdata`` (what a reader
returns for one rank), ``results`` (what a rank's worker hands to the cluster step),
``options`` (how a run reads and runs), ``outputs`` (the names of the output files),
``problems`` (what was skipped or odd), ``errors`` (the project's exceptions and exit codes),
``units`` / ``numtext`` (exact time/size conversions, integers in text), ``ranks`` (rank lists
as text) and ``tasks`` (which kernel rows are communication tasks)."""
