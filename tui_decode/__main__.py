from tui_decode.cli.main import main

raise SystemExit(main())
