"""The shared data model every layer speaks: ``schemas`` (the fixed Arrow schema of each kind
of record), ``rankdata`` (what a reader returns for one rank), ``problems`` (what was skipped
or odd), ``errors`` (the project's exceptions and exit codes), ``units`` (exact time/size unit
conversions) and ``tasks`` (which kernel rows are communication tasks)."""
