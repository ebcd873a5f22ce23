from tui_decode.cli import main

raise SystemExit(main())
