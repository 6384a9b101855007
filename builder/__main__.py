from builder.cli import main

main()
