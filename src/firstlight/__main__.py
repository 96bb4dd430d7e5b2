from firstlight.cli import main

main()
