from jetson_install.entry import main

main()
