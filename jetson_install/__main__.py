from jetson_install.cli.entry import main

main()
