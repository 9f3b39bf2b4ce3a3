from ascendprof.cli import main

main()
