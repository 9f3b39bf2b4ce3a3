from ascendprof.cli.main import main

main()
