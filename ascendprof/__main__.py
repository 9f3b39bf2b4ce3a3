from ascendprof.cli.main import run

run()
